/*
 * Progress. A software NIC moves packets only when its process runs its
 * progress: in the foreground from opal_progress, and in the background
 * from a thread that, when the application has not progressed the device
 * since its last look, does the transport's work for it (acknowledges,
 * retransmits, answers RDMA reads): a peer reading from a process that
 * computes outside MPI gets its data, and a busy process is never declared
 * dead. Between two looks the thread sleeps on the devices' event fds (a
 * datagram, or a timer the device armed for its own deadlines, wakes it), at
 * most btl_doorbell_async_interval microseconds: the work follows the data,
 * not a period (a read request waited up to a whole interval). The background thread
 * never calls into the upper layer: received messages (their buffers held)
 * and completions wait for the next foreground progress. With
 * MPI_THREAD_MULTIPLE the foreground defers the same way, so no callback runs
 * under the module's lock.
 */
#include "btl_doorbell.h"

#include <poll.h>
#include <string.h>
#include <time.h>

static void mca_btl_doorbell_deferred_construct(mca_btl_doorbell_deferred_t *d)
{
    d->data = NULL;
    d->comp = NULL;
    d->frag = NULL;
    d->qp   = NULL;
}

OBJ_CLASS_INSTANCE(mca_btl_doorbell_deferred_t, opal_free_list_item_t,
                   mca_btl_doorbell_deferred_construct, NULL);

/* Called with the module lock held (the background thread holds it). */
mca_btl_doorbell_deferred_t *mca_btl_doorbell_defer(
    mca_btl_doorbell_module_t *module, int kind)
{
    mca_btl_doorbell_deferred_t *d;

    d = (mca_btl_doorbell_deferred_t *)opal_free_list_get_st(
        &module->deferred_items);
    if (OPAL_UNLIKELY(d == NULL)) {
        return NULL;
    }
    d->kind = kind;
    opal_list_append(&module->deferred, &d->super.super);
    return d;
}

static void mca_btl_doorbell_deliver(mca_btl_doorbell_module_t   *module,
                                     mca_btl_doorbell_deferred_t *d)
{
    const mca_btl_active_message_callback_t *reg;

    switch (d->kind) {
    case MCA_BTL_DOORBELL_DEFER_AM: {
        mca_btl_base_segment_t    seg = {.seg_addr.pval = d->data,
                                         .seg_len       = d->length};
        mca_btl_base_descriptor_t des = {.des_segments      = &seg,
                                         .des_segment_count = 1};

        reg = &mca_btl_base_active_message_trigger[d->am_id];
        module->stats.recvs++;
        module->stats.recv_bytes += d->length;
        reg->cbfunc(&module->super, d->am_id, &des, reg->cbdata);
        BTL_DOORBELL_LOCK(module);
        doorbell_iface_release_am(module->iface, d->data);
        BTL_DOORBELL_UNLOCK(module);
        break;
    }
    case MCA_BTL_DOORBELL_DEFER_COMP:
        d->comp->func(d->comp, d->status);
        break;
    case MCA_BTL_DOORBELL_DEFER_SEND:
        mca_btl_doorbell_frag_complete(d->frag, d->rc);
        break;
    case MCA_BTL_DOORBELL_DEFER_ERROR:
        BTL_DOORBELL_LOCK(module);
        mca_btl_doorbell_qp_error(module, d->qp, d->status, d->message);
        BTL_DOORBELL_UNLOCK(module);
        break;
    }
}

static int mca_btl_doorbell_deliver_deferred(mca_btl_doorbell_module_t *module)
{
    opal_list_t                  ready;
    mca_btl_doorbell_deferred_t *d;
    int                          count = 0;

    OBJ_CONSTRUCT(&ready, opal_list_t);
    BTL_DOORBELL_LOCK(module);
    opal_list_join(&ready, opal_list_get_end(&ready), &module->deferred);
    BTL_DOORBELL_UNLOCK(module);
    while (NULL != (d = (mca_btl_doorbell_deferred_t *)opal_list_remove_first(
                        &ready))) {
        mca_btl_doorbell_deliver(module, d);
        BTL_DOORBELL_LOCK(module);
        opal_free_list_return_st(&module->deferred_items, &d->super);
        BTL_DOORBELL_UNLOCK(module);
        count++;
    }
    OBJ_DESTRUCT(&ready);
    return count;
}

int mca_btl_doorbell_module_progress(mca_btl_doorbell_module_t *module)
{
    int count;

    /* another thread progressing this device is as good as us */
    if (module->locking && opal_mutex_trylock(&module->lock) != 0) {
        return 0;
    }
    module->progress_calls++;
    count = (int)doorbell_iface_progress(module->iface);
    if (!opal_list_is_empty(&module->pending_eps)) {
        count += (int)mca_btl_doorbell_module_drain(module);
    }
    BTL_DOORBELL_UNLOCK(module);
    if (OPAL_UNLIKELY(!opal_list_is_empty(&module->deferred))) {
        count += mca_btl_doorbell_deliver_deferred(module);
    }
    return count;
}

/* Background progress of one module the application left alone, then its
 * wake-up armed. Returns 1 when armed (its event fd wakes the thread for the
 * next datagram or deadline), 0 when work is still pending or the device
 * cannot be armed (a queue pair in error stays "busy"): the thread then comes
 * back after the interval, as it did before it had an fd to wait on. Called
 * with the module's lock held. */
static int mca_btl_doorbell_async_work(mca_btl_doorbell_module_t *m)
{
    m->in_background = 1;
    m->stats.background++;
    doorbell_iface_progress_background(m->iface);
    /* arm is busy when something arrived or fell due during the pass: one
     * more pass takes it, a second busy answer is left to the interval */
    int armed = doorbell_iface_arm(m->iface) == DOORBELL_OK;
    if (!armed) {
        doorbell_iface_progress_background(m->iface);
        armed = doorbell_iface_arm(m->iface) == DOORBELL_OK;
    }
    m->in_background = 0;
    return armed;
}

static void *mca_btl_doorbell_async_main(void *arg)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;
    struct timespec               interval;
    struct pollfd                 fds[MCA_BTL_DOORBELL_MAX_MODULES];
    mca_btl_doorbell_module_t    *armed[MCA_BTL_DOORBELL_MAX_MODULES];
    int                           timeout_ms;

    (void)arg;
    interval.tv_sec  = cm->async_interval / 1000000;
    interval.tv_nsec = (long)(cm->async_interval % 1000000) * 1000;
    timeout_ms       = (int)((cm->async_interval + 999) / 1000);
    while (!cm->async_stop) {
        int nfds = 0, all_armed = 1;

        for (int i = 0; i < cm->num_modules && !cm->async_stop; i++) {
            mca_btl_doorbell_module_t *m     = cm->modules[i];
            uint64_t                   calls = m->progress_calls;

            /* the application progresses by itself: stay out of its way
             * (waiting on its fd would wake the thread for every packet
             * the application takes itself) */
            if (calls != m->progress_seen) {
                m->progress_seen = calls;
                all_armed        = 0;
                continue;
            }
            if (opal_mutex_trylock(&m->lock) != 0) {
                all_armed = 0;
                continue;
            }
            if (mca_btl_doorbell_async_work(m)) {
                fds[nfds].fd      = doorbell_iface_event_fd(m->iface);
                fds[nfds].events  = POLLIN;
                fds[nfds].revents = 0;
                armed[nfds++]     = m;
            } else {
                all_armed = 0;
            }
            opal_mutex_unlock(&m->lock);
        }
        if (cm->async_stop) {
            break;
        }
        if (!all_armed || nfds == 0) {
            nanosleep(&interval, NULL);
            continue;
        }
        /* every device left to the thread is armed: sleep until one has
         * work, or the interval passes (the application may be back) */
        if (poll(fds, (nfds_t)nfds, timeout_ms) > 0) {
            for (int i = 0; i < nfds; i++) {
                if (fds[i].revents != 0) {
                    armed[i]->stats.wakeups++;
                }
            }
        }
    }
    return NULL;
}

void mca_btl_doorbell_async_start(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    if (cm->async_running || cm->async_interval == 0) {
        return;
    }
    cm->async_stop = 0;
    if (pthread_create(&cm->async_thread, NULL, mca_btl_doorbell_async_main,
                       NULL) != 0) {
        BTL_DOORBELL_ERROR("no background progress thread: pthread_create "
                           "failed; peers reading from this process wait "
                           "for it to enter MPI");
        return;
    }
    cm->async_running = 1;
    BTL_DOORBELL_VERBOSE(1, "background progress every %u us",
                         cm->async_interval);
}

void mca_btl_doorbell_async_stop(void)
{
    mca_btl_doorbell_component_t *cm = &mca_btl_doorbell_component;

    if (!cm->async_running) {
        return;
    }
    cm->async_stop = 1;
    pthread_join(cm->async_thread, NULL);
    cm->async_running = 0;
}
