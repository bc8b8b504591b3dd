// Result<T>: a value or an error message that names the device, file and
// cause. Every failure in the pinning library is reported this way; nothing
// aborts on bad input.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace doorbell::pin {

struct Error {
    std::string message;
};

template <class T>
class Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool               ok() const { return v_.index() == 0; }
    T                 &value() { return std::get<0>(v_); }
    const T           &value() const { return std::get<0>(v_); }
    T                 *operator->() { return &value(); }
    const T           *operator->() const { return &value(); }
    T                 &operator*() { return value(); }
    const T           &operator*() const { return value(); }
    const std::string &error() const { return std::get<1>(v_).message; }

private:
    std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;

inline Status ok_status()
{
    return Status(Ok{});
}

} // namespace doorbell::pin
