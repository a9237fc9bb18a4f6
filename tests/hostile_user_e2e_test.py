#!/usr/bin/env python3
"""A hostile lab user against the real daemon: the daemon runs as root in the
test's own home, the client and its jobs as `nobody` (setpriv drops the
privileges). Each test repeats one attack of the hardening issue (numbers in
the names) and asserts that the daemon is alive and answering afterwards and
that nothing root-only was served. Root only: skipped, saying so, otherwise."""

import base64
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_e2e_test import GPUHERD, Home, run  # noqa: E402

NOBODY = 65534
CAN_RUN = os.geteuid() == 0 and shutil.which("setpriv") is not None
WHY_NOT = "needs root (the daemon runs as root, the attacker as nobody) and setpriv"
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

# Run as nobody: one HTTP request over the unix socket or TCP, the reply as JSON.
CLIENT = r"""
import base64, json, socket, sys
a = json.loads(sys.stdin.read())
body = base64.b64decode(a["body"])
lines = [a["method"] + " " + a["target"] + " HTTP/1.1", "Connection: close", "Content-Length: %d" % len(body)]
lines += ["%s: %s" % kv for kv in a["headers"].items()]
if a["port"]:
    s = socket.create_connection(("127.0.0.1", a["port"]), timeout=20)
else:
    s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(a["socket"])
s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
data = b""
try:
    while True:
        c = s.recv(65536)
        if not c: break
        data += c
except ConnectionResetError:
    pass
head, _, rest = data.partition(b"\r\n\r\n")
first, *hl = head.decode("latin-1").split("\r\n")
hdrs = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in hl if ":" in l}
print(json.dumps({"status": int(first.split()[1]) if first else 0, "headers": hdrs,
                  "body": rest.decode("utf-8", "replace")}))
"""


class Sentinel:
    """What a hostile job aims at: a root-only tree (files, a folder, modes,
    owners) and a root process. check() asserts that none of it changed."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuherd-sentinel-")  # root's, 0700
        self.secret = os.path.join(self.dir, "secret")
        with open(self.secret, "w") as f:
            f.write("root-only sentinel " + uuid.uuid4().hex + "\n")
        os.chmod(self.secret, 0o600)
        self.sub = os.path.join(self.dir, "sub")
        os.mkdir(self.sub, 0o700)
        with open(os.path.join(self.sub, "exit.reserved"), "w") as f:
            f.write("not the daemon's\n")
        self.proc = subprocess.Popen(["sleep", "3600"], start_new_session=True)
        with open(f"/proc/{self.proc.pid}/stat") as f:
            self.proc_start = int(f.read().rsplit(")", 1)[1].split()[19])
        self.before = self.snapshot()

    def snapshot(self):
        seen = {}
        for top, dirs, files in os.walk(self.dir):
            for name in [top] + [os.path.join(top, f) for f in files]:
                st = os.lstat(name)
                data = None
                if stat.S_ISREG(st.st_mode):
                    with open(name, "rb") as f:
                        data = f.read()
                seen[name] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, data)
        return seen

    def check(self, test):
        test.assertEqual(self.snapshot(), self.before, "the root-only sentinel tree changed")
        test.assertIsNone(self.proc.poll(), "the root sentinel process was killed")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(CAN_RUN, WHY_NOT)
class HostileUserTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.secret_dir = tempfile.mkdtemp(prefix="gpuherd-root-only-")  # 0700 root
        self.secret = "ROOT-ONLY-" + uuid.uuid4().hex
        self.secret_file = os.path.join(self.secret_dir, "secret.jsonl")
        with open(self.secret_file, "w") as f:
            f.write(json.dumps({"step": 1, "loss": 0.5, "token": self.secret}) + "\n")
        os.chmod(self.secret_file, 0o600)
        self.home.start("--sim", "1", "--interval", "200ms")
        self.served = []  # every body the attacker got back

    def tearDown(self):
        self.home.close()
        shutil.rmtree(self.secret_dir, ignore_errors=True)

    # --- helpers ---------------------------------------------------------------

    def port(self):
        with open(os.path.join(self.home.dir, "api-port")) as f:
            return int(f.read())

    def request(self, method, target, body=b"", headers=None, tcp=False):
        """One request as nobody."""
        args = {"method": method, "target": target, "body": base64.b64encode(body).decode(),
                "headers": {"Host": "localhost", **(headers or {})},
                "socket": os.path.join(self.home.dir, "gpuherd.sock"), "port": self.port() if tcp else 0}
        proc = subprocess.run(AS_NOBODY + [sys.executable, "-c", CLIENT], input=json.dumps(args),
                              capture_output=True, text=True, timeout=60, cwd="/tmp")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        reply = json.loads(proc.stdout)
        self.served.append(reply["body"])
        return reply

    def nobody(self, *args, check=True, timeout=60):
        proc = subprocess.run(AS_NOBODY + [GPUHERD, "--home", self.home.dir] + list(args), capture_output=True,
                              text=True, timeout=timeout, cwd="/tmp", env=dict(os.environ, NO_COLOR="1"))
        self.served.append(proc.stdout + proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"nobody: gpuherd {args} exited {proc.returncode}: {proc.stderr}")
        return proc

    def submit(self, *args):
        return int(self.nobody("submit", *args).stdout)

    def job(self, jid):
        return json.loads(run("show", str(jid), "--json", home=self.home.dir).stdout)

    def wait_state(self, jid, states, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.job(jid)["state"] in states:
                return self.job(jid)
            time.sleep(0.1)
        self.fail(f"job {jid} is {self.job(jid)['state']}, not {states}")

    def assert_alive(self, within=2.0):
        """The daemon process lives and answers /v1/health quickly."""
        self.assertIsNone(self.home.daemon.poll(), "the daemon died")
        start = time.time()
        reply = self.request("GET", "/v1/health")
        self.assertEqual(reply["status"], 200, reply)
        self.assertLess(time.time() - start, within + 1.0, "the daemon answered too slowly")

    def assert_nothing_root_only_served(self):
        for body in self.served:
            self.assertNotIn(self.secret, body)

    def restart(self):
        self.home.daemon.terminate()
        self.home.daemon.wait(timeout=20)
        self.home.start("--sim", "1", "--interval", "200ms")

    # --- crashes and hangs ----------------------------------------------------

    def test_01_deeply_nested_request_body(self):
        depth = 200_000
        reply = self.request("POST", "/v1/jobs", b'{"command": ' + b"[" * depth + b"]" * depth + b"}")
        self.assertEqual(reply["status"], 400, reply)
        self.assertLess(len(reply["body"]), 2000)
        self.assert_alive()

    def test_02_03_hostile_metrics_files_and_restart(self):
        depth = 200_000
        nested = self.submit("--", "python3", "-c",
                             "import os,time; open(os.environ['GPUHERD_METRICS_FILE'],'w').write("
                             f"'[' * {depth} + '\\n'); time.sleep(2)")
        fifo = self.submit("--", "sh", "-c", 'rm -f "$GPUHERD_METRICS_FILE"; mkfifo "$GPUHERD_METRICS_FILE"; '
                                             "sleep 30")
        self.wait_state(fifo, ["running"])
        deadline = time.time() + 4
        while time.time() < deadline:  # the metrics intake polls meanwhile
            self.assert_alive()
            time.sleep(0.3)
        self.wait_state(nested, ["completed"])
        # A restart reads the same files again: no crash loop, no hang.
        self.restart()
        self.assert_alive()
        self.nobody("cancel", str(fifo))
        self.wait_state(fifo, ["cancelled"])
        self.assert_alive()

    def test_04_billion_laughs_pipeline(self):
        bomb = "name: laughs\nx-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
        prev = "a"
        for name in "bcdefghi":
            bomb += f"x-{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]\n"
            prev = name
        bomb += "params: {p: *i}\nsteps:\n  s: {run: 'true'}\n"
        path = os.path.join(tempfile.mkdtemp(prefix="gpuherd-bomb-"), "bomb.yaml")
        with open(path, "w") as f:
            f.write(bomb)
        os.chmod(os.path.dirname(path), 0o755)
        os.chmod(path, 0o644)
        try:
            # The CLI, under 1 GiB of address space: a clear error, no blow-up.
            proc = subprocess.run(["prlimit", "--as=1073741824"] + AS_NOBODY +
                                  [GPUHERD, "--home", self.home.dir, "run", path], capture_output=True, text=True,
                                  timeout=60, cwd="/tmp")
            self.assertNotEqual(proc.returncode, 0)
            self.assertNotIn("bad_alloc", proc.stderr)
            self.assertIn("bomb.yaml", proc.stderr)  # a file:line error, not a crash
        finally:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        # The daemon, sent the file directly.
        reply = self.request("POST", "/v1/pipelines", json.dumps({"yaml": bomb}).encode(),
                             {"Content-Type": "application/json"})
        self.assertGreaterEqual(reply["status"], 400, reply)
        self.assertLess(reply["status"], 500, reply)
        self.assert_alive()

    # --- reading and writing where a user may not -------------------------------

    def test_08_metrics_file_linked_to_a_root_only_file(self):
        jid = self.submit("--", "sh", "-c",
                          f'ln -sf {self.secret_file} "$GPUHERD_METRICS_FILE"; sleep 3')
        self.wait_state(jid, ["completed"])
        time.sleep(0.5)
        reply = self.request("GET", f"/v1/jobs/{jid}/metrics")
        self.assertEqual(reply["status"], 200, reply)
        self.assertEqual(json.loads(reply["body"])["metrics"], [])
        self.nobody("show", str(jid), "--json")
        self.nobody("logs", str(jid))
        self.assert_nothing_root_only_served()
        self.assert_alive()

    def test_09_symlink_planted_for_the_next_attempt_folder(self):
        target = tempfile.mkdtemp(prefix="gpuherd-root-dir-")  # root's, 0700
        try:
            # The job owns jobs/<id>/: it points the folder of its next
            # attempt at a root-owned directory, then gets preempted.
            low = self.submit("--gpus", "1", "--preemptible", "--priority", "-10", "--max-restarts", "2", "--",
                              "sh", "-c", f'ln -sfn {target} "$(dirname "$GPUHERD_METRICS_FILE")/2"; sleep 60')
            self.wait_state(low, ["running"])
            time.sleep(1)
            high = int(run("submit", "--gpus", "1", "--priority", "50", "--", "sleep", "2",
                           home=self.home.dir).stdout)
            self.wait_state(high, ["completed"], timeout=60)
            deadline = time.time() + 20
            while time.time() < deadline and self.job(low)["attempt"] < 2:
                time.sleep(0.2)
            self.assertGreaterEqual(self.job(low)["attempt"], 2, "the planted folder was never reached")
            time.sleep(2)  # the second attempt is launched or refused meanwhile
            st = os.lstat(target)
            self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0, 0o700))
            self.assertEqual(os.listdir(target), [], "the daemon wrote into a directory it was pointed at")
            self.assert_alive()
        finally:
            run("cancel", str(low), home=self.home.dir, check=False)
            shutil.rmtree(target, ignore_errors=True)

    def test_10_setsid_escape_is_ended_on_cancel(self):
        marker = f"1000.{os.getpid()}7"
        jid = self.submit("--", "sh", "-c", f"setsid sleep {marker} & sleep 60")
        self.wait_state(jid, ["running"])
        deadline = time.time() + 10
        while time.time() < deadline and not self.sleepers(marker):
            time.sleep(0.1)
        self.assertTrue(self.sleepers(marker), "the escaped process never started")
        self.nobody("cancel", str(jid))
        self.wait_state(jid, ["cancelled"])
        deadline = time.time() + 15
        while time.time() < deadline and self.sleepers(marker):
            time.sleep(0.2)
        left = self.sleepers(marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(left, [], "a process that left its session outlived the cancelled job")
        self.assert_alive()

    @staticmethod
    def sleepers(marker):
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{name}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmd and state != "Z":
                found.append(int(name))
        return found

    def test_14_dns_rebinding_over_tcp(self):
        jid = self.submit("--env", f"SECRET_ENV={self.secret}", "--name", "rebind", "--", "sh", "-c",
                          f"echo {self.secret}")
        self.wait_state(jid, ["completed"])
        rebound = self.request("GET", "/v1/jobs", headers={"Host": "evil.example.com"}, tcp=True)
        self.assertEqual(rebound["status"], 421, rebound)
        self.assertNotIn('"jobs"', rebound["body"])
        listed = self.request("GET", f"/v1/jobs/{jid}", headers={"Host": "127.0.0.1"}, tcp=True)
        self.assertEqual(listed["status"], 200, listed)
        for field in ('"command"', '"env"'):
            self.assertNotIn(field, listed["body"])
        logs = self.request("GET", f"/v1/jobs/{jid}/logs", headers={"Host": "localhost"}, tcp=True)
        self.assertEqual(logs["status"], 401, logs)
        posted = self.request("POST", "/v1/jobs", b'{"command": ["true"]}', {"Host": "localhost"}, tcp=True)
        self.assertEqual(posted["status"], 401, posted)
        self.assert_nothing_root_only_served()
        self.assert_alive()

    # --- nothing run twice --------------------------------------------------------

    # --- the job's folders: root never acts through them (issue 29) -----------

    def wait_attempt_ended(self, jid, attempt, timeout=40):
        """The job's `attempt` is over (a later one started, or the job ended)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.job(jid)
            if j["attempt"] > attempt or j["state"] in ("completed", "failed", "cancelled"):
                return j
            time.sleep(0.2)
        self.fail(f"attempt {attempt} of job {jid} never ended: {self.job(jid)}")

    def test_29_1_2_links_at_every_name_of_the_next_attempt_lead_nowhere(self):
        sentinel = Sentinel()
        jid = None
        try:
            s = sentinel.secret
            # Attempt 1 makes the folder of attempt 2 itself and plants a link
            # to a root-only file at every name root used to open there (the
            # temporary names with every gpuherd pid), a FIFO, and a link for
            # the fence's files; then it asks to be requeued.
            plant = (
                'd="$(dirname "$GPUHERD_METRICS_FILE")/2"; mkdir -p "$d"; '
                f'for n in stdout stderr shim exit exit.reserved fence.ledger fence.status; do ln -sf {s} "$d/$n"; done; '
                'for p in $(pgrep -f gpuherd); do for n in shim exit exit.reserved; do '
                f'ln -sf {s} "$d/$n.tmp.$p"; done; done; mkfifo "$d/fifo"; ')
            jid = self.submit("--max-restarts", "3", "--", "sh", "-c",
                              f'if [ "$GPUHERD_ATTEMPT" = 1 ]; then {plant} touch "$d/../planted"; sleep 60; '
                              'else echo second; fi')
            self.wait_state(jid, ["running"])
            planted = os.path.join(self.home.dir, "jobs", str(jid), "planted")
            deadline = time.time() + 20
            while time.time() < deadline and not os.path.exists(planted):
                time.sleep(0.1)
            self.assertTrue(os.path.exists(planted), "the job never planted its links")
            self.nobody("requeue", str(jid))
            j = self.wait_attempt_ended(jid, 1)
            deadline = time.time() + 30
            while time.time() < deadline and j["state"] not in ("completed", "failed", "cancelled"):
                time.sleep(0.2)
                j = self.job(jid)
            sentinel.check(self)
            # The user's links got in the way of the user's own job, and it says so.
            self.assertEqual(j["state"], "failed", j)
            shown = self.nobody("show", str(jid)).stdout
            self.assertIn("a symbolic link is in the way", shown)
            self.assert_alive()
        finally:
            if jid is not None:
                run("cancel", str(jid), home=self.home.dir, check=False)
            sentinel.close()

    def test_29_3_a_swapped_attempt_folder_redirects_nothing(self):
        sentinel = Sentinel()
        try:
            # The job moves its attempt folder away and links a root folder in
            # its place; the exit record is root's own and is still found.
            jid = self.submit("--", "sh", "-c",
                              'd="$(dirname "$GPUHERD_METRICS_FILE")/$GPUHERD_ATTEMPT"; cd /; '
                              f'mv "$d" "$d.moved" && ln -s {sentinel.sub} "$d" && sleep 1 && exit 7')
            j = self.wait_state(jid, ["failed", "completed"])
            self.assertEqual(j["exit_code"], 7, j)
            sentinel.check(self)
            self.assertEqual(sorted(os.listdir(sentinel.sub)), ["exit.reserved"])
            self.assert_alive()
        finally:
            sentinel.close()

    def test_29_4_a_forged_supervisor_record_is_not_trusted_after_a_restart(self):
        sentinel = Sentinel()
        try:
            forged = json.dumps({"pid": sentinel.proc.pid, "start_time": sentinel.proc_start})
            # The running job replaces its attempt folder with one naming a
            # root process as its supervisor, where the old layout kept it.
            jid = self.submit("--", "sh", "-c",
                              'd="$(dirname "$GPUHERD_METRICS_FILE")/$GPUHERD_ATTEMPT"; cd /; '
                              f'mv "$d" "$d.moved"; mkdir "$d"; echo \'{forged}\' > "$d/shim"; '
                              'touch "$d/../forged"; sleep 600')
            self.wait_state(jid, ["running"])
            deadline = time.time() + 20
            while time.time() < deadline and not os.path.exists(os.path.join(self.home.dir, "jobs", str(jid),
                                                                             "forged")):
                time.sleep(0.1)
            self.restart()
            j = self.wait_state(jid, ["running"])
            self.nobody("cancel", str(jid))
            j = self.wait_state(jid, ["cancelled"])
            sentinel.check(self)
            self.assert_alive()
        finally:
            sentinel.close()

    def test_29_5_a_job_submitted_over_the_api_without_cwd_runs_in_its_attempt_folder(self):
        reply = self.request("POST", "/v1/jobs", json.dumps({"command": ["sh", "-c", "pwd; id -u"]}).encode())
        self.assertIn(reply["status"], (200, 201), reply)
        jid = json.loads(reply["body"])["id"]
        j = self.wait_state(jid, ["completed", "failed"])
        self.assertEqual(j["state"], "completed", j)
        out = self.nobody("logs", str(jid)).stdout.split()
        self.assertEqual(out, [os.path.join(self.home.dir, "jobs", str(jid), "1"), str(NOBODY)])
        # The attempt's folder and logs are the user's own, made as the user.
        folder = os.stat(os.path.join(self.home.dir, "jobs", str(jid), "1"))
        log = os.stat(os.path.join(self.home.dir, "jobs", str(jid), "1", "stdout"))
        self.assertEqual((folder.st_uid, log.st_uid), (NOBODY, NOBODY))
        # What root trusts is not in the user's tree at all.
        self.assertFalse(os.path.exists(os.path.join(self.home.dir, "jobs", str(jid), "1", "exit")))
        self.assertTrue(os.path.exists(os.path.join(self.home.dir, "run", "jobs", str(jid), "1", "exit")))
        st = os.stat(os.path.join(self.home.dir, "run"))
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o700))

    def test_15_a_repeated_idempotency_key_acts_once(self):
        body = json.dumps({"command": ["true"], "name": "once"}).encode()
        key = {"Idempotency-Key": "nobody-1"}
        first = self.request("POST", "/v1/jobs", body, key)
        again = self.request("POST", "/v1/jobs", body, key)
        self.assertIn(first["status"], (200, 201), first)
        self.assertEqual((again["status"], again["body"]), (first["status"], first["body"]))
        self.assertEqual(again["headers"].get("idempotent-replayed"), "true")
        # Another user's key of the same name is not nobody's outcome.
        out = run("submit", "--name", "root-one", "--", "true", home=self.home.dir).stdout
        self.assertNotEqual(out.strip(), "")
        ps = json.loads(run("ps", "--all", "--json", home=self.home.dir).stdout)
        self.assertEqual(sorted(j["name"] for j in ps), ["once", "root-one"])
        self.assert_alive()


if __name__ == "__main__":
    unittest.main()
