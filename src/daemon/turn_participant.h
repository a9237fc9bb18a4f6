// The seam between the event loop's turn and every service with side effects
// outside the store (the queue's launches and signals, sbatch calls, webhooks).
// A turn runs its tasks, then every participant's EndOfTurn (in registration
// order: what one submits is seen by the next), then commits the turn's
// WriteBatch, then calls AfterCommit with the outcome. A participant acts on
// the world only in AfterCommit(true); on false it drops everything the turn
// decided and brings its memory back in line with the store, so that a failed
// commit leaves no trace: no launch, signal, sbatch or webhook without its
// record.
#pragma once

#include <functional>
#include <vector>

namespace gpuherd::daemon {

class TurnParticipant {
 public:
  virtual ~TurnParticipant() = default;
  // Before the commit; may add to the turn's WriteBatch.
  virtual void EndOfTurn() {}
  // After the commit (or after a turn with nothing to commit: true).
  virtual void AfterCommit(bool committed) = 0;
};

// A participant made of two functions, for services that predate the
// interface.
class FunctionParticipant : public TurnParticipant {
 public:
  FunctionParticipant(std::function<void()> end_of_turn, std::function<void(bool)> after_commit)
      : end_of_turn_(std::move(end_of_turn)), after_commit_(std::move(after_commit)) {}
  void EndOfTurn() override {
    if (end_of_turn_) end_of_turn_();
  }
  void AfterCommit(bool committed) override {
    if (after_commit_) after_commit_(committed);
  }

 private:
  std::function<void()> end_of_turn_;
  std::function<void(bool)> after_commit_;
};

// The participants of the loop's turns, in the order they were added. Loop
// thread only.
class TurnParticipants {
 public:
  // `p` must outlive the registry or be removed first.
  void Add(TurnParticipant* p) { participants_.push_back(p); }
  void Remove(TurnParticipant* p) { std::erase(participants_, p); }
  void EndOfTurn() {
    for (TurnParticipant* p : participants_) p->EndOfTurn();
  }
  void AfterCommit(bool committed) {
    for (TurnParticipant* p : participants_) p->AfterCommit(committed);
  }

 private:
  std::vector<TurnParticipant*> participants_;
};

}  // namespace gpuherd::daemon
