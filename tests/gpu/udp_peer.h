/*
 * A target process for puts over the UDP device: fork()ed before the test
 * starts threads, it opens an iface on lo, registers a data buffer and an
 * array of 64-bit flag words, tells the parent where they are, progresses
 * until every flag reaches the expected value (a SET signal lands after its
 * data: RC order), checks the data against pattern(), reports, and keeps
 * progressing (ACKs for the last puts) until the parent hangs up.
 */
#pragma once

#include "doorbell_core.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace doorbell_gpu_test {

inline uint8_t pattern(uint64_t region, uint64_t k)
{
    return uint8_t(region * 31 + k * 7 + 1);
}

struct PeerInfo {
    uint8_t  dev[32];
    uint8_t  ifa[32];
    uint64_t data_addr;
    uint64_t flag_addr;
    uint32_t data_rkey;
    uint32_t flag_rkey;
    int32_t  status; /* DOORBELL_OK once the child is ready */
};

struct PeerResult {
    uint64_t flags_ok;  /* flag words at the expected value */
    uint64_t bytes_bad; /* data bytes differing from pattern() */
    int32_t  timed_out;
};

class UdpPeer {
public:
    /* regions of region_bytes each, one flag per region, expected value */
    UdpPeer(uint32_t regions, uint32_t region_bytes, uint64_t expect) :
        regions_(regions), region_bytes_(region_bytes), expect_(expect)
    {
        int up[2], down[2];
        if ((pipe(up) != 0) || (pipe(down) != 0)) {
            ADD_FAILURE() << "pipe: " << strerror(errno);
            return;
        }
        pid_ = fork();
        if (pid_ == 0) {
            close(up[0]);
            close(down[1]);
            child(up[1], down[0]);
            _exit(0);
        }
        close(up[1]);
        close(down[0]);
        from_child_ = up[0];
        to_child_   = down[1];
        ok_ = read_all(from_child_, &info_, sizeof(info_), 20000) && (info_.status == DOORBELL_OK);
    }

    ~UdpPeer()
    {
        if (to_child_ >= 0) {
            close(to_child_);
        }
        if (from_child_ >= 0) {
            close(from_child_);
        }
        if (pid_ > 0) {
            int st;
            waitpid(pid_, &st, 0);
        }
    }

    bool            ok() const { return ok_; }
    const PeerInfo &info() const { return info_; }

    /* Waits (at most 30 s) for the child's verdict. */
    bool result(PeerResult *r) { return read_all(from_child_, r, sizeof(*r), 30000); }

private:
    static bool read_all(int fd, void *buf, size_t len, int timeout_ms)
    {
        auto *p = static_cast<char *>(buf);
        while (len > 0) {
            struct pollfd pfd = {fd, POLLIN, 0};
            if (poll(&pfd, 1, timeout_ms) <= 0) {
                return false;
            }
            ssize_t n = read(fd, p, len);
            if (n <= 0) {
                return false;
            }
            p += n;
            len -= size_t(n);
        }
        return true;
    }

    void child(int up, int down)
    {
        PeerInfo              info    = {};
        doorbell_pd_t        *pd      = nullptr;
        doorbell_iface_t     *iface   = nullptr;
        doorbell_mr_t        *mr_data = nullptr, *mr_flag = nullptr;
        std::vector<uint8_t>  data(size_t(regions_) * region_bytes_, 0);
        std::vector<uint64_t> flags(regions_, 0);

        doorbell_iface_params_t p;
        doorbell_iface_params_init(&p);
        p.device    = "lo";
        info.status = doorbell_pd_create(&pd);
        if (info.status == DOORBELL_OK) {
            info.status = doorbell_iface_open(pd, &p, &iface);
        }
        if (info.status == DOORBELL_OK) {
            info.status = doorbell_mr_register(pd, data.data(), data.size(),
                                               DOORBELL_ACCESS_REMOTE_WRITE, &mr_data,
                                               &info.data_rkey);
        }
        if (info.status == DOORBELL_OK) {
            info.status = doorbell_mr_register(pd, flags.data(), flags.size() * 8,
                                               DOORBELL_ACCESS_REMOTE_WRITE, &mr_flag,
                                               &info.flag_rkey);
        }
        if ((info.status == DOORBELL_OK) &&
            ((doorbell_iface_device_address_length(iface) > sizeof(info.dev)) ||
             (doorbell_iface_address_length(iface) > sizeof(info.ifa)))) {
            info.status = DOORBELL_ERR_UNSUPPORTED;
        }
        if (info.status == DOORBELL_OK) {
            doorbell_iface_get_device_address(iface, info.dev);
            doorbell_iface_get_address(iface, info.ifa);
            info.data_addr = (uint64_t)(uintptr_t)data.data();
            info.flag_addr = (uint64_t)(uintptr_t)flags.data();
        }
        if (write(up, &info, sizeof(info)) != sizeof(info) || (info.status != DOORBELL_OK)) {
            return;
        }

        PeerResult r        = {};
        auto       deadline = std::chrono::steady_clock::now() + std::chrono::seconds(25);
        for (uint64_t n = 1;; ++n) {
            doorbell_iface_progress(iface);
            if ((n % 256) == 0) {
                struct pollfd pfd = {down, POLLIN, 0};
                if (poll(&pfd, 1, 0) > 0) { /* the parent hung up early */
                    r.timed_out = 1;
                    break;
                }
            }
            uint64_t ok = 0;
            for (uint32_t t = 0; t < regions_; ++t) {
                ok += (flags[t] == expect_);
            }
            if (ok == regions_) {
                r.flags_ok = ok;
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) {
                r.flags_ok  = ok;
                r.timed_out = 1;
                break;
            }
        }
        for (uint32_t t = 0; t < regions_; ++t) {
            for (uint32_t k = 0; k < region_bytes_; ++k) {
                r.bytes_bad += (data[size_t(t) * region_bytes_ + k] != pattern(t, k));
            }
        }
        if (write(up, &r, sizeof(r)) != sizeof(r)) {
            return;
        }
        /* keep answering (ACKs, later puts) until the parent hangs up */
        for (;;) {
            doorbell_iface_progress(iface);
            struct pollfd pfd = {down, POLLIN, 0};
            if (poll(&pfd, 1, 0) > 0) {
                break;
            }
        }
        doorbell_mr_deregister(pd, mr_flag);
        doorbell_mr_deregister(pd, mr_data);
        doorbell_iface_close(iface);
        doorbell_pd_destroy(pd);
    }

    uint32_t regions_;
    uint32_t region_bytes_;
    uint64_t expect_;
    pid_t    pid_        = -1;
    int      from_child_ = -1;
    int      to_child_   = -1;
    bool     ok_         = false;
    PeerInfo info_       = {};
};

} /* namespace doorbell_gpu_test */
