// The memory fence's shared account: one small file per job attempt, mapped
// by every process of the job, that says how much GPU memory each process
// holds. Plain C layout and libc only, because it is compiled into the
// preloaded library (no C++ runtime there) as well as into the daemon, which
// reads it for `gpuherd show`.
//
// Consistency: every change is made under a process-shared robust mutex and
// changes one process's entry first, then the total. A process that dies
// holding the mutex leaves at most the total stale; the next locker gets
// EOWNERDEAD, recomputes the total from the entries and marks the mutex
// consistent. A dead process's entry (pid gone, or reused by a process that
// started at another time) is reclaimed whenever the account is short: the
// driver freed that process's memory when it died.
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

namespace gpuherd::fence {

inline constexpr uint32_t kLedgerMagic = 0x46454e43;  // "FENC"
inline constexpr uint32_t kLedgerVersion = 1;
inline constexpr int kLedgerEntries = 512;  // processes of one job at a time

struct LedgerEntry {
  int32_t pid;          // 0: free
  uint32_t reserved;
  uint64_t start_time;  // /proc/PID/stat field 22, so a reused pid is not mistaken
  uint64_t bytes;
};

struct LedgerFile {
  uint32_t magic;  // written last when the file is set up
  uint32_t version;
  uint64_t limit_bytes;
  uint64_t used_bytes;  // the sum of the entries' bytes
  pthread_mutex_t mutex;
  char padding[64];
  LedgerEntry entries[kLedgerEntries];
};

// When `pid` started (clock ticks since boot), 0 when it is gone.
uint64_t ProcessStartTime(pid_t pid);

// Opens (creating when missing) and maps the ledger at `path`; the first
// process sets it up with `limit_bytes` (later ones keep that limit). Returns
// null and a reason in `error` (at most `error_size` bytes) when it cannot.
LedgerFile* OpenLedger(const char* path, uint64_t limit_bytes, char* error, size_t error_size);

// Locks the ledger, repairing it when the last holder died with the lock.
// Returns false only when the mutex itself is unusable.
bool LockLedger(LedgerFile* ledger);
void UnlockLedger(LedgerFile* ledger);

// Under the lock: the entry of (pid, start_time), claimed when it has none;
// -1 when the table is full of live processes.
int ClaimEntry(LedgerFile* ledger, pid_t pid, uint64_t start_time);

// Under the lock: frees the entries of processes that are gone; returns the
// bytes given back.
uint64_t ReclaimDead(LedgerFile* ledger);

// Under the lock: adds `bytes` to entry `slot` when the total stays within
// the limit (reclaiming dead processes first when it would not); false when
// the share is used up.
bool Reserve(LedgerFile* ledger, int slot, uint64_t bytes);
// Under the lock: adds `bytes` whatever the limit (a driver that gave a
// little more than asked, such as pitch padding).
void Charge(LedgerFile* ledger, int slot, uint64_t bytes);
// Under the lock: takes `bytes` off entry `slot` (never below zero).
void Release(LedgerFile* ledger, int slot, uint64_t bytes);

}  // namespace gpuherd::fence
