#include "core/status.h"

namespace gpuherd {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kAlreadyExists: return "already exists";
    case Code::kFailedPrecondition: return "failed precondition";
    case Code::kUnavailable: return "unavailable";
    case Code::kPermissionDenied: return "permission denied";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kIoError: return "I/O error";
    case Code::kDataLoss: return "data loss";
    case Code::kInternal: return "internal error";
    case Code::kAborted: return "aborted";
    case Code::kResourceExhausted: return "resource exhausted";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::Annotate(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace gpuherd
