// Raw UDP ping-pong on the loopback interface: the floor of the doorbell UDP
// device's path (one sendto + one busy-polled recv per hop, no protocol).
// Two threads, one socket each; prints the one-way latency (RTT / 2) in us,
// median and mean over the timed round trips.
//   doorbell-udp-pingpong [iterations] [message bytes]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kWarmup = 1000; ///< round trips before timing starts

int open_socket(sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        std::perror("socket");
        std::exit(1);
    }
    std::memset(addr, 0, sizeof(*addr));
    addr->sin_family      = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len         = sizeof(*addr);
    if (bind(fd, reinterpret_cast<sockaddr *>(addr), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(addr), &len) != 0) {
        std::perror("bind(127.0.0.1)");
        std::exit(1);
    }
    return fd;
}

// Busy-polls until one datagram arrives.
void recv_spin(int fd, char *buf, size_t size)
{
    for (;;) {
        ssize_t n = recv(fd, buf, size, MSG_DONTWAIT);
        if (n >= 0)
            return;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            std::perror("recv");
            std::exit(1);
        }
    }
}

void send_to(int fd, const char *buf, size_t size, const sockaddr_in &to)
{
    if (sendto(fd, buf, size, 0, reinterpret_cast<const sockaddr *>(&to), sizeof(to)) !=
        static_cast<ssize_t>(size)) {
        std::perror("sendto");
        std::exit(1);
    }
}

} // namespace

int main(int argc, char **argv)
{
    const int    iters = argc > 1 ? std::atoi(argv[1]) : 20000;
    const size_t size  = argc > 2 ? std::strtoul(argv[2], nullptr, 0) : 8;
    if (iters <= 0 || size == 0 || size > 65000) {
        std::fprintf(stderr, "usage: %s [iterations > 0] [1..65000 bytes]\n", argv[0]);
        return 2;
    }

    sockaddr_in ping_addr, pong_addr;
    int         ping  = open_socket(&ping_addr);
    int         pong  = open_socket(&pong_addr);
    const int   total = iters + kWarmup;

    std::thread responder([&] {
        std::vector<char> buf(size);
        for (int i = 0; i < total; ++i) {
            recv_spin(pong, buf.data(), size);
            send_to(pong, buf.data(), size, ping_addr);
        }
    });

    std::vector<char>   buf(size, 'x');
    std::vector<double> rtt_us;
    rtt_us.reserve(iters);
    for (int i = 0; i < total; ++i) {
        auto start = std::chrono::steady_clock::now();
        send_to(ping, buf.data(), size, pong_addr);
        recv_spin(ping, buf.data(), size);
        auto end = std::chrono::steady_clock::now();
        if (i >= kWarmup)
            rtt_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    responder.join();
    close(ping);
    close(pong);

    double sum = 0;
    for (double r : rtt_us)
        sum += r;
    std::nth_element(rtt_us.begin(), rtt_us.begin() + iters / 2, rtt_us.end());
    std::printf("udp_pingpong size %zu iterations %d one_way_mean_us %.3f one_way_median_us %.3f\n",
                size, iters, sum / iters / 2, rtt_us[iters / 2] / 2);
    return 0;
}
