/*
 * MPI point-to-point under fire: while the ranks exchange messages of 1 B to
 * 4 MiB with both ring neighbours (every byte checked), a stranger in rank 0
 * -- a plain UDP socket that is no part of the job's transport -- sends
 * forged datagrams to the doorbell sockets of the other ranks: the 72-byte
 * active messages that aborted a rank (UCP AM id 23 with header_length
 * 0xffff0000, UCP's software PUT id 17 to 0x1000) in the wire format of
 * before and of now, WRITEs and SENDs with guessed tokens and QP numbers,
 * and handshakes without the iface's token. Only this job's sockets are
 * targeted: each rank finds its own (its fds' socket inodes in
 * /proc/net/udp) and the ranks gather them.
 * Prints "hostile_check: N ranks, F forged datagrams, W wrong bytes"; exit
 * status 0 when every byte arrived intact.
 */
#include <mpi.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SIZE  (4u << 20)
#define MAX_PORTS 8

/* The 127.0.0.1 UDP ports of this process's sockets. */
static int own_udp_ports(int *ports, int max)
{
    unsigned long  inodes[256];
    int            ninodes = 0, n = 0;
    DIR           *d = opendir("/proc/self/fd");
    struct dirent *e;
    char           path[512], link[128], line[512];
    FILE          *f;

    while (d != NULL && (e = readdir(d)) != NULL && ninodes < 256) {
        ssize_t len;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        len = readlink(path, link, sizeof(link) - 1);
        if (len > 0) {
            link[len] = '\0';
            if (sscanf(link, "socket:[%lu]", &inodes[ninodes]) == 1) {
                ++ninodes;
            }
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    f = fopen("/proc/self/net/udp", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL && n < max) {
        unsigned      addr, port;
        unsigned long inode;
        int           i;
        /* "sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode" */
        if (sscanf(line, " %*d: %x:%x %*x:%*x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &port,
                   &inode) != 3 ||
            addr != htonl(INADDR_LOOPBACK)) {
            continue;
        }
        for (i = 0; i < ninodes; ++i) {
            if (inodes[i] == inode) {
                ports[n++] = (int)port;
            }
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return n;
}

struct stranger {
    int          *ports;
    int           nports;
    volatile int  stop;
    unsigned long sent;
};

/* 64-byte header, then the payload: version 2 (PSN 0 from any source was
 * taken as a new connection) or 3 (token at 8, QP at 16). */
static size_t forge(uint8_t *d, int version, uint8_t opcode, uint8_t am_id, uint64_t token,
                    uint32_t qp, uint64_t seed)
{
    const uint32_t magic = 0x4c424244, len = 8, hdr_len = 0xffff0000u;
    const uint64_t addr = 0x1000;

    memset(d, 0, 64 + 16);
    memcpy(d, &magic, 4);
    d[4] = (uint8_t)version;
    d[5] = opcode;
    d[6] = 3; /* FIRST | LAST */
    d[7] = am_id;
    if (version == 2) {
        memcpy(d + 20, &len, 4);
        memcpy(d + 36, &len, 4);
    } else {
        memcpy(d + 8, &token, 8);
        memcpy(d + 16, &qp, 4);
        memcpy(d + 28, &len, 4);
        memcpy(d + 44, &len, 4);
        memcpy(d + 32, &seed, 8); /* a WRITE's target: somewhere */
    }
    if (am_id == 23) {
        memcpy(d + 64 + 4, &hdr_len, 4);
    } else {
        memcpy(d + 64, &addr, 8);
    }
    if (opcode == 9) { /* CONNECT: a 16-byte payload */
        uint32_t sixteen = 16;
        memcpy(d + 28, &sixteen, 4);
        memcpy(d + 16, &(uint32_t){0}, 4);
        memcpy(d + 20, &qp, 4);
        return 64 + 16;
    }
    return 64 + 8;
}

static void *stranger_run(void *arg)
{
    struct stranger   *s  = arg;
    int                fd = socket(AF_INET, SOCK_DGRAM, 0);
    uint8_t            d[128];
    uint64_t           x = 0x9e3779b97f4a7c15ull;
    struct sockaddr_in to;

    memset(&to, 0, sizeof(to));
    to.sin_family      = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!s->stop && fd >= 0) {
        int i;
        for (i = 0; i < s->nports; ++i) {
            size_t n;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            to.sin_port = htons((uint16_t)s->ports[i]);
            switch (s->sent % 5) {
            case 0:
                n = forge(d, 2, 4, 23, 0, 0, x); /* the AM that aborted a rank */
                break;
            case 1:
                n = forge(d, 2, 4, 17, 0, 0, x); /* UCP's software PUT */
                break;
            case 2:
                n = forge(d, 3, 4, (s->sent & 1) ? 23 : 17, x, (uint32_t)(x >> 32), x);
                break;
            case 3:
                n = forge(d, 3, 1, 0, x, (uint32_t)x, x); /* a WRITE */
                break;
            default:
                n = forge(d, 3, 9, 0, x, (uint32_t)(x >> 16), x); /* a handshake */
                break;
            }
            if (sendto(fd, d, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n) {
                ++s->sent;
            }
        }
        usleep(50);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static uint8_t pattern(int src, size_t size, size_t offset)
{
    uint64_t x = (uint64_t)src * 0x9e3779b97f4a7c15ull ^ (uint64_t)size * 31u ^
                 (uint64_t)offset * 0x2545f4914f6cdd1dull;
    return (uint8_t)(x ^ (x >> 29) ^ (x >> 47));
}

int main(int argc, char **argv)
{
    int             rank, nranks, right, left, nports, i, rounds;
    int             mine[MAX_PORTS], *all;
    size_t          size, k, bad = 0, total_bad = 0;
    uint8_t        *sbuf, *rbuf;
    struct stranger s;
    pthread_t       thread;
    unsigned long   total_sent = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    right = (rank + 1) % nranks;
    left  = (rank + nranks - 1) % nranks;
    sbuf  = malloc(MAX_SIZE);
    rbuf  = malloc(MAX_SIZE);
    all   = calloc((size_t)nranks * MAX_PORTS, sizeof(int));

    /* a first exchange opens every rank's endpoints and sockets */
    MPI_Sendrecv(&rank, 1, MPI_INT, right, 9, &i, 1, MPI_INT, left, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    memset(mine, 0, sizeof(mine));
    nports = own_udp_ports(mine, MAX_PORTS);
    MPI_Allgather(mine, MAX_PORTS, MPI_INT, all, MAX_PORTS, MPI_INT, MPI_COMM_WORLD);

    memset(&s, 0, sizeof(s));
    if (rank == 0) {
        /* the other ranks' sockets: rank 0's own traffic stays the control */
        s.ports = calloc((size_t)nranks * MAX_PORTS, sizeof(int));
        for (i = MAX_PORTS; i < nranks * MAX_PORTS; ++i) {
            if (all[i] != 0) {
                s.ports[s.nports++] = all[i];
            }
        }
        pthread_create(&thread, NULL, stranger_run, &s);
    }

    for (rounds = 0; rounds < 20; ++rounds) {
        for (size = 1; size <= MAX_SIZE; size <<= 2) {
            MPI_Request reqs[2];
            for (k = 0; k < size; ++k) {
                sbuf[k] = pattern(rank, size, k);
            }
            memset(rbuf, 0xee, size);
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, left, 0, MPI_COMM_WORLD, &reqs[0]);
            MPI_Isend(sbuf, (int)size, MPI_BYTE, right, 0, MPI_COMM_WORLD, &reqs[1]);
            MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
            for (k = 0; k < size; ++k) {
                bad += rbuf[k] != pattern(left, size, k);
            }
        }
    }

    if (rank == 0) {
        s.stop = 1;
        pthread_join(thread, NULL);
        total_sent = s.sent;
        free(s.ports);
    }
    MPI_Reduce(&bad, &total_bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("hostile_check: %d ranks, %d sockets found in rank 0, %lu forged datagrams, "
               "%zu wrong bytes\n",
               nranks, nports, total_sent, total_bad);
    }
    free(sbuf);
    free(rbuf);
    free(all);
    MPI_Finalize();
    return (total_bad == 0 && (rank != 0 || total_sent > 0)) ? 0 : 1;
}
