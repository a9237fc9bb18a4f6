"""Job-side helpers for gpuherd's job protocol, standard library only (Python 3.9+).

gpuherd runs a job as a plain command and talks to it through environment variables,
files and signals (README "Job protocol"). This module wraps that protocol:

    import sys
    import gpuherd_job as job

    job.install_signal_handlers()               # first: an early SIGTERM is then not fatal
    state = job.load_checkpoint() or {"step": 0, "model": init_model(), "cursor": 0}
    while state["step"] < steps:
        state["step"] += 1
        loss, state["cursor"] = train_one_step(state["model"], state["cursor"])
        job.log_metrics(step=state["step"], loss=loss)
        if state["step"] % 100 == 0 or job.should_checkpoint():
            job.save_checkpoint(state)          # also keeps random.getstate()
        if job.should_exit():
            sys.exit(job.EXIT_STOPPED)

Resume rule: load_checkpoint() returns the saved state whenever a checkpoint exists
in the checkpoint directory, whether or not GPUHERD_RESUME is set. gpuherd keeps that
directory per job and across its restarts, so a checkpoint there is always this job's
own progress, and a restart gpuherd did not make (a Slurm requeue, a rerun by hand)
resumes too. resuming() reports what GPUHERD_RESUME says, for jobs that want to log it.

Signals: SIGUSR1 asks for a checkpoint now (the job goes on); SIGTERM asks for a
checkpoint and an exit within the grace period, after which gpuherd sends SIGKILL.
Handlers are installed by install_signal_handlers(), which should_checkpoint() calls on
first use; call it at start-up so that a SIGTERM before the first check is not fatal.
"""

import json
import os
import pickle
import random
import signal
import sys
import tempfile
import threading
import time

__all__ = [
    "EXIT_STOPPED",
    "CHECKPOINT_FILE",
    "log_metrics",
    "install_signal_handlers",
    "should_checkpoint",
    "should_exit",
    "save_checkpoint",
    "load_checkpoint",
    "checkpoint_dir",
    "metrics_file",
    "resuming",
    "restart_count",
]

# The exit status of a job that checkpointed and stopped on SIGTERM (128 + 15, as a
# shell reports it): the work is not done, so it must not read as success.
EXIT_STOPPED = 128 + signal.SIGTERM

# The file, inside the checkpoint directory, that save_checkpoint() replaces atomically.
CHECKPOINT_FILE = "checkpoint.pkl"

_FORMAT_VERSION = 1
# Protocol 4 reads on every Python 3.4+, so a checkpoint survives an interpreter change.
_PICKLE_PROTOCOL = 4

_lock = threading.Lock()
_warned_no_metrics = False
_handlers_installed = False
# Set from signal handlers; Python runs handlers in the main thread between bytecodes,
# so plain assignments are enough.
_checkpoint_requested = False
_exit_requested = False


def metrics_file():
    """The path of GPUHERD_METRICS_FILE, or None outside gpuherd."""
    return os.environ.get("GPUHERD_METRICS_FILE") or None


def checkpoint_dir():
    """The path of GPUHERD_CHECKPOINT_DIR, or None outside gpuherd."""
    return os.environ.get("GPUHERD_CHECKPOINT_DIR") or None


def resuming():
    """True when gpuherd restarted this job (GPUHERD_RESUME=1)."""
    return os.environ.get("GPUHERD_RESUME") == "1"


def restart_count():
    """How many times gpuherd restarted this job (GPUHERD_RESTART_COUNT), 0 on the first run."""
    raw = os.environ.get("GPUHERD_RESTART_COUNT", "").strip()
    if not raw:
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        print(f"gpuherd_job: ignoring GPUHERD_RESTART_COUNT={raw!r}: not an integer",
              file=sys.stderr)
        return 0


def _to_json_value(value):
    # Tensors, numpy scalars and Decimals all convert through float(); anything else is
    # a caller's mistake that deserves a clear message rather than a silent drop.
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"log_metrics: value {value!r} of type {type(value).__name__} "
                        "is not a number, string or bool") from None


def log_metrics(step=None, **values):
    """Appends one JSON line to GPUHERD_METRICS_FILE, e.g.
    {"time": 1718000000.123, "step": 120, "loss": 0.41}.

    "time" (seconds since the epoch) is added here; "step" is included when given.
    Values are numbers, strings or bools; objects with __float__ (tensors, numpy
    scalars) are converted. NaN and infinities are written as NaN/Infinity, which
    gpuherd's anomaly checks read. Each line is written with one write() on a file
    opened for appending, so it reaches the file whole and at once.

    Outside gpuherd (the variable unset) this does nothing and warns once on stderr.
    Raises TypeError for a value that is not a number and ValueError for a "time" key.
    """
    global _warned_no_metrics
    if "time" in values:
        raise ValueError("log_metrics: 'time' is added by log_metrics; name the value otherwise")
    path = metrics_file()
    if path is None:
        with _lock:
            if not _warned_no_metrics:
                _warned_no_metrics = True
                print("gpuherd_job: GPUHERD_METRICS_FILE is not set; metrics are not recorded",
                      file=sys.stderr)
        return
    line = {"time": round(time.time(), 3)}
    if step is not None:
        line["step"] = int(step)
    line.update(values)
    data = (json.dumps(line, default=_to_json_value, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _on_usr1(signum, frame):
    global _checkpoint_requested
    _checkpoint_requested = True


def _on_term(signum, frame):
    global _checkpoint_requested, _exit_requested
    _checkpoint_requested = True
    _exit_requested = True


def install_signal_handlers():
    """Installs the SIGUSR1 and SIGTERM handlers (once; later calls do nothing).

    They replace any earlier handlers for those signals. Must be called from the main
    thread (Python's rule for signal handlers); raises RuntimeError otherwise.
    """
    global _handlers_installed
    with _lock:
        if _handlers_installed:
            return
        try:
            signal.signal(signal.SIGUSR1, _on_usr1)
            signal.signal(signal.SIGTERM, _on_term)
        except ValueError as e:
            raise RuntimeError("gpuherd_job: signal handlers can only be installed from the "
                               "main thread; call install_signal_handlers() there first") from e
        _handlers_installed = True


def should_checkpoint():
    """True when a signal asked for a checkpoint that has not been written yet.

    SIGUSR1's request is cleared by the next successful save_checkpoint(); after
    SIGTERM this stays True. Installs the signal handlers on first use.
    """
    install_signal_handlers()
    return _checkpoint_requested


def should_exit():
    """True once SIGTERM came: save a checkpoint and exit (EXIT_STOPPED) soon."""
    install_signal_handlers()
    return _exit_requested


def _resolve_dir(directory):
    directory = directory or checkpoint_dir()
    if directory is None:
        raise RuntimeError("gpuherd_job: GPUHERD_CHECKPOINT_DIR is not set; run under gpuherd "
                           "or pass directory=...")
    return directory


def save_checkpoint(state, directory=None):
    """Atomically replaces the checkpoint with `state` (a picklable dict).

    The state should hold everything a resumed run needs to continue exactly: the
    model, the data cursor (epoch, position, shuffled order) and any random generators
    of its own. The global `random` module's state is saved with it and restored by
    load_checkpoint(). The file is written to a temporary name, fsync'd and renamed
    over the old one, and the directory is fsync'd, so a crash at any moment leaves
    either the old checkpoint or the new one, never a torn file.

    `directory` defaults to GPUHERD_CHECKPOINT_DIR and is created if missing. Returns
    the checkpoint's path. Raises RuntimeError without a directory, OSError when the
    write fails and pickle.PicklingError for state that cannot be pickled; a failed
    save leaves the previous checkpoint in place and the SIGUSR1 request pending.
    """
    global _checkpoint_requested
    directory = _resolve_dir(directory)
    os.makedirs(directory, exist_ok=True)
    payload = {
        "format": _FORMAT_VERSION,
        "saved_at": time.time(),
        "restart_count": restart_count(),
        "python_random": random.getstate(),
        "state": state,
    }
    data = pickle.dumps(payload, protocol=_PICKLE_PROTOCOL)
    path = os.path.join(directory, CHECKPOINT_FILE)
    fd, tmp = tempfile.mkstemp(prefix="." + CHECKPOINT_FILE + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    if not _exit_requested:
        _checkpoint_requested = False
    return path


def load_checkpoint(directory=None, restore_random=True):
    """Returns the state last saved by save_checkpoint(), or None when there is none.

    A checkpoint is loaded whenever one exists (see the module's resume rule). With
    restore_random (the default) the global `random` module continues from where it
    was at the save. `directory` defaults to GPUHERD_CHECKPOINT_DIR. Raises
    RuntimeError without a directory, and ValueError naming the file when it is not a
    checkpoint this module wrote. Only load checkpoints you wrote: this is pickle.
    """
    path = os.path.join(_resolve_dir(directory), CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            payload = pickle.load(f)
    except FileNotFoundError:
        return None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError) as e:
        raise ValueError(f"gpuherd_job: {path} is not a readable checkpoint ({e}); "
                         "delete it to start over") from e
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT_VERSION:
        raise ValueError(f"gpuherd_job: {path} was not written by save_checkpoint() "
                         f"(format {_FORMAT_VERSION}); delete it to start over")
    if restore_random:
        random.setstate(payload["python_random"])
    return payload["state"]
