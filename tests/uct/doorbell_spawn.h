// Runs tools (ucx_info, ucx_perftest, mpirun) as child processes for the
// integration tests: posix_spawn with extra environment, stdout and stderr
// captured together, every child waited for. No sleeps: callers synchronize
// on process exit and output.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

extern char **environ;

namespace doorbell_test {

struct Child {
    pid_t       pid    = -1;
    int         out_fd = -1; ///< read end of the child's stdout+stderr
    std::string output;
    int         status = -1; ///< exit code, or 128 + signal
    int         signal = 0;  ///< signal that ended the child, 0 if it exited
    bool        done   = false;
};

// The current environment with `overrides` ("NAME=value") replacing or
// adding entries.
inline std::vector<std::string> make_env(const std::vector<std::string> &overrides)
{
    std::map<std::string, std::string> env;
    for (char **e = environ; *e != nullptr; ++e) {
        std::string kv(*e);
        env[kv.substr(0, kv.find('='))] = kv;
    }
    for (const auto &kv : overrides)
        env[kv.substr(0, kv.find('='))] = kv;
    std::vector<std::string> out;
    for (auto &[k, kv] : env)
        out.push_back(kv);
    return out;
}

inline Child spawn(const std::vector<std::string> &argv,
                   const std::vector<std::string> &env_overrides)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);

    std::vector<std::string> env = make_env(env_overrides);
    std::vector<char *>      cargv, cenv;
    for (auto &a : argv)
        cargv.push_back(const_cast<char *>(a.c_str()));
    cargv.push_back(nullptr);
    for (auto &e : env)
        cenv.push_back(const_cast<char *>(e.c_str()));
    cenv.push_back(nullptr);

    Child child;
    int   rc = posix_spawnp(&child.pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        throw std::runtime_error("posix_spawnp(" + argv[0] + "): " + std::strerror(rc));
    }
    child.out_fd = fds[0];
    return child;
}

inline void finish(Child &c)
{
    int st = 0;
    while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
    }
    c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    c.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    c.done   = true;
}

// Reads every child's output until all of them have closed it, then reaps
// them. Reading all pipes together keeps a chatty child from blocking.
inline void wait_all(std::vector<Child *> children)
{
    for (;;) {
        std::vector<pollfd>  pfds;
        std::vector<Child *> owners;
        for (Child *c : children)
            if (c->out_fd >= 0) {
                pfds.push_back({c->out_fd, POLLIN, 0});
                owners.push_back(c);
            }
        if (pfds.empty())
            break;
        if (poll(pfds.data(), pfds.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        }
        for (size_t i = 0; i < pfds.size(); ++i) {
            if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char    buf[4096];
            ssize_t n = read(pfds[i].fd, buf, sizeof(buf));
            if (n > 0) {
                owners[i]->output.append(buf, n);
            } else if (n == 0 || errno != EINTR) {
                close(owners[i]->out_fd);
                owners[i]->out_fd = -1;
            }
        }
    }
    for (Child *c : children)
        if (!c->done)
            finish(*c);
}

inline Child run(const std::vector<std::string> &argv,
                 const std::vector<std::string> &env_overrides = {})
{
    Child c = spawn(argv, env_overrides);
    wait_all({&c});
    return c;
}

// A TCP port that was free a moment ago on 127.0.0.1 (the kernel's choice).
inline int reserve_port()
{
    int         fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family      = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len        = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&addr), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
        throw std::runtime_error(std::string("reserving a port: ") + std::strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

inline bool contains(const std::string &haystack, const std::string &needle)
{
    return haystack.find(needle) != std::string::npos;
}

} // namespace doorbell_test

namespace doorbell_test {

// Reaps the child if it has exited, without blocking.
inline bool exited(Child &c)
{
    if (c.done)
        return true;
    int   st = 0;
    pid_t r  = waitpid(c.pid, &st, WNOHANG);
    if (r != c.pid)
        return false;
    c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    c.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    c.done   = true;
    return true;
}

} // namespace doorbell_test
