// Status and Result<T>: how errors cross module boundaries. Exceptions never
// cross a module boundary, a thread, an HTTP handler or the CUDA module.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace gpuherd {

enum class Code {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong; the message says what to fix
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition, // the system is not in a state where this can run
  kUnavailable,        // a component (driver, daemon, GPU) does not answer
  kPermissionDenied,
  kUnauthenticated,
  kIoError,
  kDataLoss,
  kInternal,
  kAborted,           // stopped on request before it finished (Ctrl-C, cancel)
  kResourceExhausted, // a limit is reached; the same request may succeed later
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string ToString() const;

  // Prefixes context: Status(kIoError, "x").Annotate("open db") -> "open db: x".
  Status Annotate(const std::string& context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status IoError(std::string m) { return {Code::kIoError, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Aborted(std::string m) { return {Code::kAborted, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

// A value or the Status that explains why there is none. Accessing value() of
// an error Result is a programming error (checked by assert).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                      // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}               // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpuherd

// Returns early from the enclosing function when `expr` is an error Status.
#define GPUHERD_RETURN_IF_ERROR(expr)           \
  do {                                          \
    ::gpuherd::Status _st = (expr);             \
    if (!_st.ok()) return _st;                  \
  } while (0)
