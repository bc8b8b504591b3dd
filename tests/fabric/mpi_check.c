/*
 * doorbell-mpi-check: correctness across the fabric, for the fabric tests.
 *
 *   doorbell-mpi-check p2p [MAX]  every rank pair exchanges every size from
 *                                 0 B to MAX bytes (default and limit 4 MiB;
 *                                 eager and rendezvous), both directions,
 *                                 each byte checked
 *   doorbell-mpi-check allreduce  MPI_Allreduce (int sum, double max) of
 *                                 0..1 Mi elements, every element checked
 *   doorbell-mpi-check hosts      the ranks that MPI_COMM_TYPE_SHARED puts on
 *                                 one node are exactly those sharing a
 *                                 hostname, PID/IPC/UTS/mount namespaces, and
 *                                 /dev/shm and /tmp (a file one rank makes
 *                                 there is seen by the others of its node and
 *                                 by no other rank); lists the nodes
 * Prints "<test> OK <n> checks" on rank 0 and exits 0, or names the first
 * wrong byte (or pair of ranks) and exits 1.
 */
#include <mpi.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHECK_MAX_BYTES (4u << 20)

static int    rank, nranks;
static size_t max_bytes = CHECK_MAX_BYTES;

static unsigned char pattern(int from, int to, size_t len, size_t i)
{
    return (unsigned char)(from * 31 + to * 7 + len * 13 + i * 101 + (i >> 8));
}

static size_t p2p_sizes(size_t *sizes)
{
    size_t n = 0;

    sizes[n++] = 0;
    for (size_t s = 1; s <= max_bytes; s *= 2) {
        sizes[n++] = s;
        if (s > 2 && s < max_bytes)
            sizes[n++] = s + s / 2 + 1; /* odd sizes between the powers */
    }
    return n;
}

static int check_p2p(long *checks)
{
    size_t         sizes[64], nsizes = p2p_sizes(sizes);
    unsigned char *sbuf = malloc(CHECK_MAX_BYTES), *rbuf = malloc(CHECK_MAX_BYTES);
    int            bad = 0;

    if (!sbuf || !rbuf)
        return -1;
    /* Every ordered pair (a, b), a < b: a sends, b echoes a different pattern. */
    for (int a = 0; a < nranks && !bad; a++) {
        for (int b = a + 1; b < nranks && !bad; b++) {
            for (size_t k = 0; k < nsizes && !bad; k++) {
                size_t len  = sizes[k];
                int    me_a = rank == a, me_b = rank == b;
                if (!me_a && !me_b)
                    continue;
                int other = me_a ? b : a;
                for (size_t i = 0; i < len; i++)
                    sbuf[i] = pattern(rank, other, len, i);
                memset(rbuf, 0xee, len);
                if (me_a) {
                    MPI_Send(sbuf, (int)len, MPI_BYTE, other, 5, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, (int)len, MPI_BYTE, other, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, (int)len, MPI_BYTE, other, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, (int)len, MPI_BYTE, other, 6, MPI_COMM_WORLD);
                }
                for (size_t i = 0; i < len; i++) {
                    if (rbuf[i] != pattern(other, rank, len, i)) {
                        fprintf(stderr,
                                "p2p: rank %d from %d, %zu B: byte %zu is 0x%02x, want 0x%02x\n",
                                rank, other, len, i, rbuf[i], pattern(other, rank, len, i));
                        bad = 1;
                        break;
                    }
                }
                ++*checks;
            }
        }
    }
    free(sbuf);
    free(rbuf);
    return bad;
}

static int check_allreduce(long *checks)
{
    const size_t max_count = 1u << 20;
    int         *iin = malloc(max_count * sizeof(int)), *iout = malloc(max_count * sizeof(int));
    double *din = malloc(max_count * sizeof(double)), *dout = malloc(max_count * sizeof(double));
    int     bad = 0;

    if (!iin || !iout || !din || !dout)
        return -1;
    for (size_t count = 0; count <= max_count && !bad; count = count ? count * 4 : 1) {
        for (size_t i = 0; i < count; i++) {
            iin[i] = (int)((i % 1000) * (rank + 1));
            din[i] = (double)rank * 0.5 + (double)(i % 7);
        }
        MPI_Allreduce(iin, iout, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(din, dout, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (size_t i = 0; i < count; i++) {
            int    want_i = (int)((i % 1000) * (size_t)(nranks * (nranks + 1) / 2));
            double want_d = (double)(nranks - 1) * 0.5 + (double)(i % 7);
            if (iout[i] != want_i || dout[i] != want_d) {
                fprintf(
                    stderr,
                    "allreduce: rank %d, count %zu, element %zu: sum %d (want %d), max %g (want %g)\n",
                    rank, count, i, iout[i], want_i, dout[i], want_d);
                bad = 1;
                break;
            }
        }
        *checks += 2;
    }
    free(iin);
    free(iout);
    free(din);
    free(dout);
    return bad;
}

/* What one rank sees of its machine. */
#define HOSTS_MAX_RANKS  64
#define HOSTS_NAME_BYTES 64
static const char *const host_ns_names[] = {"pid", "ipc", "uts", "mnt"};
#define HOSTS_NS_COUNT (sizeof(host_ns_names) / sizeof(host_ns_names[0]))
struct host_view {
    char          hostname[HOSTS_NAME_BYTES];
    uint64_t      ns[HOSTS_NS_COUNT];        /* inode of /proc/self/ns/<name> */
    int           node_leader;               /* lowest world rank of its shared-memory node */
    unsigned char sees_shm[HOSTS_MAX_RANKS]; /* sees rank r's file in /dev/shm */
    unsigned char sees_tmp[HOSTS_MAX_RANKS]; /* sees rank r's file in /tmp */
};

static void probe_path(char *path, size_t len, const char *dir, unsigned tag, int r)
{
    snprintf(path, len, "%s/doorbell-check-%08x-%d", dir, tag, r);
}

/* Rank 0 compares every pair: one node by MPI_COMM_TYPE_SHARED iff one host by everything else. */
static int check_hosts_pairs(const struct host_view *v, long *checks)
{
    int bad = 0;

    for (int a = 0; a < nranks; a++) {
        for (int b = a + 1; b < nranks; b++) {
            int         same = v[a].node_leader == v[b].node_leader;
            const char *what = NULL;
            if (same != (strcmp(v[a].hostname, v[b].hostname) == 0))
                what = "hostname";
            for (size_t k = 0; k < HOSTS_NS_COUNT && !what; k++)
                if (same != (v[a].ns[k] == v[b].ns[k]))
                    what = host_ns_names[k];
            if (!what && (same != v[a].sees_shm[b] || same != v[b].sees_shm[a]))
                what = "/dev/shm";
            if (!what && (same != v[a].sees_tmp[b] || same != v[b].sees_tmp[a]))
                what = "/tmp";
            if (what) {
                fprintf(
                    stderr,
                    "hosts: ranks %d (%s) and %d (%s) are %s by MPI_COMM_TYPE_SHARED but %s %s\n",
                    a, v[a].hostname, b, v[b].hostname, same ? "one node" : "two nodes",
                    same ? "differ in" : "share", what);
                bad = 1;
            }
            ++*checks;
        }
    }
    if (bad)
        return 1;
    int nodes = 0;
    for (int a = 0; a < nranks; a++)
        nodes += v[a].node_leader == a;
    printf("hosts: %d nodes\n", nodes);
    for (int a = 0; a < nranks; a++) {
        if (v[a].node_leader != a)
            continue;
        printf("hosts: node %s: ranks", v[a].hostname);
        for (int b = a; b < nranks; b++)
            if (v[b].node_leader == a)
                printf(" %d", b);
        printf("\n");
    }
    return 0;
}

static int check_hosts(long *checks)
{
    static struct host_view all[HOSTS_MAX_RANKS]; /* rank 0's view of every rank */
    struct host_view        me = {0};
    MPI_Comm                node;
    unsigned                tag;
    char                    path[256];
    int                     bad = 0;

    if (nranks > HOSTS_MAX_RANKS) {
        if (rank == 0)
            fprintf(stderr, "hosts: at most %d ranks\n", HOSTS_MAX_RANKS);
        return 1;
    }
    /* A failure is reported and the collectives still run: no rank hangs. */
    if (gethostname(me.hostname, sizeof(me.hostname) - 1) != 0) {
        perror("gethostname");
        bad = 1;
    }
    for (size_t k = 0; k < HOSTS_NS_COUNT; k++) {
        struct stat st = {0};
        snprintf(path, sizeof(path), "/proc/self/ns/%s", host_ns_names[k]);
        if (stat(path, &st) != 0) {
            perror(path);
            bad = 1;
        }
        me.ns[k] = (uint64_t)st.st_ino;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Allreduce(&rank, &me.node_leader, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);

    /* A file per rank in /dev/shm and in /tmp, named after this job. */
    tag = (unsigned)getpid() ^ (unsigned)time(NULL) << 8;
    MPI_Bcast(&tag, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    const char *dirs[] = {"/dev/shm", "/tmp"};
    for (int d = 0; d < 2; d++) {
        probe_path(path, sizeof(path), dirs[d], tag, rank);
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (fd < 0) {
            perror(path);
            bad = 1;
        } else {
            close(fd);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        probe_path(path, sizeof(path), "/dev/shm", tag, r);
        me.sees_shm[r] = access(path, F_OK) == 0;
        probe_path(path, sizeof(path), "/tmp", tag, r);
        me.sees_tmp[r] = access(path, F_OK) == 0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int d = 0; d < 2; d++) {
        probe_path(path, sizeof(path), dirs[d], tag, rank);
        unlink(path);
    }

    MPI_Gather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0)
        bad |= check_hosts_pairs(all, checks);
    return bad;
}

int main(int argc, char **argv)
{
    long checks = 0, total = 0;
    int  bad, any_bad      = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc == 3 && strcmp(argv[1], "p2p") == 0)
        max_bytes = strtoull(argv[2], NULL, 0);
    if (argc < 2 || argc > 3 ||
        (strcmp(argv[1], "p2p") != 0 && strcmp(argv[1], "allreduce") != 0 &&
         strcmp(argv[1], "hosts") != 0) ||
        (argc == 3 && strcmp(argv[1], "p2p") != 0) || max_bytes < 1 ||
        max_bytes > CHECK_MAX_BYTES) {
        if (rank == 0)
            fprintf(stderr, "usage: %s p2p [MAX_BYTES <= %u] | allreduce | hosts\n", argv[0],
                    CHECK_MAX_BYTES);
        MPI_Finalize();
        return 2;
    }
    if (strcmp(argv[1], "p2p") == 0)
        bad = check_p2p(&checks);
    else if (strcmp(argv[1], "allreduce") == 0)
        bad = check_allreduce(&checks);
    else
        bad = check_hosts(&checks);
    if (bad < 0)
        fprintf(stderr, "rank %d: out of memory\n", rank);
    bad = bad != 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    MPI_Reduce(&checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s %ld checks on %d ranks\n", argv[1], any_bad ? "FAILED" : "OK", total, nranks);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
