#include "fence/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gpuherd::fence {
namespace {

void SetError(char* error, size_t size, const char* what, const char* path, int err) {
  if (error != nullptr && size > 0) snprintf(error, size, "%s %s: %s", what, path, strerror(err));
}

void RecomputeTotal(LedgerFile* ledger) {
  uint64_t total = 0;
  for (const LedgerEntry& e : ledger->entries) {
    if (e.pid != 0) total += e.bytes;
  }
  ledger->used_bytes = total;
}

bool Alive(const LedgerEntry& e) {
  if (kill(e.pid, 0) != 0 && errno == ESRCH) return false;
  uint64_t started = ProcessStartTime(e.pid);
  // Unreadable /proc (hidepid): trust kill's answer.
  return started == 0 || e.start_time == 0 || started == e.start_time;
}

}  // namespace

uint64_t ProcessStartTime(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[1024];
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses: count from
  // the last ')'. Field 3 follows it; start time is field 22.
  char* p = strrchr(text, ')');
  if (p == nullptr) return 0;
  int field = 2;
  for (; *p != '\0' && field < 22; ++p) {
    if (*p == ' ') ++field;
  }
  uint64_t value = 0;
  for (; *p >= '0' && *p <= '9'; ++p) value = value * 10 + static_cast<uint64_t>(*p - '0');
  return value;
}

LedgerFile* OpenLedger(const char* path, uint64_t limit_bytes, char* error, size_t error_size) {
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    SetError(error, error_size, "cannot open the ledger", path, errno);
    return nullptr;
  }
  // Setting up is serialized by flock; afterwards the mutex in the file rules.
  if (flock(fd, LOCK_EX) != 0) {
    SetError(error, error_size, "cannot lock the ledger", path, errno);
    close(fd);
    return nullptr;
  }
  struct stat st;
  LedgerFile* ledger = nullptr;
  if (fstat(fd, &st) != 0) {
    SetError(error, error_size, "cannot read the ledger", path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    SetError(error, error_size, "the ledger is not a regular file:", path, EINVAL);
  } else if (st.st_size != 0 && st.st_size != static_cast<off_t>(sizeof(LedgerFile))) {
    SetError(error, error_size, "unexpected size of the ledger", path, EINVAL);
  } else if (st.st_size == 0 && ftruncate(fd, sizeof(LedgerFile)) != 0) {
    SetError(error, error_size, "cannot size the ledger", path, errno);
  } else {
    void* map = mmap(nullptr, sizeof(LedgerFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      SetError(error, error_size, "cannot map the ledger", path, errno);
    } else {
      ledger = static_cast<LedgerFile*>(map);
      if (ledger->magic != kLedgerMagic) {
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&ledger->mutex, &attr);
        pthread_mutexattr_destroy(&attr);
        ledger->version = kLedgerVersion;
        ledger->limit_bytes = limit_bytes;
        ledger->used_bytes = 0;
        memset(ledger->entries, 0, sizeof(ledger->entries));
        __atomic_store_n(&ledger->magic, kLedgerMagic, __ATOMIC_RELEASE);
      } else if (ledger->version != kLedgerVersion) {
        SetError(error, error_size, "unknown version of the ledger", path, EINVAL);
        munmap(map, sizeof(LedgerFile));
        ledger = nullptr;
      }
    }
  }
  flock(fd, LOCK_UN);
  close(fd);  // the mapping stays
  return ledger;
}

bool LockLedger(LedgerFile* ledger) {
  int rc = pthread_mutex_lock(&ledger->mutex);
  if (rc == EOWNERDEAD) {
    // The holder died between its entry and the total: the entries are right.
    ReclaimDead(ledger);
    RecomputeTotal(ledger);
    pthread_mutex_consistent(&ledger->mutex);
    return true;
  }
  return rc == 0;
}

void UnlockLedger(LedgerFile* ledger) { pthread_mutex_unlock(&ledger->mutex); }

int ClaimEntry(LedgerFile* ledger, pid_t pid, uint64_t start_time) {
  int free_slot = -1;
  for (int i = 0; i < kLedgerEntries; ++i) {
    LedgerEntry& e = ledger->entries[i];
    if (e.pid == pid && e.start_time == start_time) return i;
    if (e.pid == 0 && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) {
    ReclaimDead(ledger);
    for (int i = 0; i < kLedgerEntries && free_slot < 0; ++i) {
      if (ledger->entries[i].pid == 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
  }
  LedgerEntry& e = ledger->entries[free_slot];
  e.bytes = 0;
  e.start_time = start_time;
  e.pid = pid;
  return free_slot;
}

uint64_t ReclaimDead(LedgerFile* ledger) {
  uint64_t freed = 0;
  for (LedgerEntry& e : ledger->entries) {
    if (e.pid == 0 || Alive(e)) continue;
    freed += e.bytes;
    e.bytes = 0;
    e.pid = 0;
  }
  if (freed > 0) RecomputeTotal(ledger);
  return freed;
}

bool Reserve(LedgerFile* ledger, int slot, uint64_t bytes) {
  auto fits = [&] { return bytes <= ledger->limit_bytes && ledger->used_bytes <= ledger->limit_bytes - bytes; };
  if (!fits()) {
    ReclaimDead(ledger);
    if (!fits()) return false;
  }
  Charge(ledger, slot, bytes);
  return true;
}

void Charge(LedgerFile* ledger, int slot, uint64_t bytes) {
  ledger->entries[slot].bytes += bytes;
  ledger->used_bytes += bytes;
}

void Release(LedgerFile* ledger, int slot, uint64_t bytes) {
  LedgerEntry& e = ledger->entries[slot];
  if (bytes > e.bytes) bytes = e.bytes;
  e.bytes -= bytes;
  ledger->used_bytes = ledger->used_bytes >= bytes ? ledger->used_bytes - bytes : 0;
}

}  // namespace gpuherd::fence
