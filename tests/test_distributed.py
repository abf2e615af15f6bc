"""Several processes under torchrun (gloo, CPU): outputs, equivalence with one
process, distributed evaluation, restarts after a killed worker, hung peers."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import REPO, SYNTHETIC_CONFIG, run_tool
from runs import stop_process_group, wait_for_training_record

pytestmark = pytest.mark.slow

SHORT = ["MODEL.DEVICE", "cpu", "DATALOADER.NUM_WORKERS", "0", "SOLVER.LOG_PERIOD", "5", "SOLVER.TEST_PERIOD", "0"]


def torchrun(*args, nproc=2, extra=(), timeout=600, console=None):
    """Run under torchrun and wait; with ``console`` (a path), start it in the
    background with its output going to that file (a pipe nobody reads while
    the test waits could fill up and stall the run)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *extra,
           os.path.join(REPO, "tools", "train_net.py"), *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    if console is not None:
        with open(console, "w") as f:  # its own session: the test can stop the agent and its workers at once
            return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def worker_exit_codes(output):
    """The exit codes torchrun reports for its failed workers (torchrun itself then exits 1)."""
    return sorted(int(code) for code in re.findall(r"^\s+exitcode\s+: (-?\d+)", output, re.MULTILINE))


def base_args(root, out, *extra):
    return ["--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", root, "OUTPUT_DIR", str(out), *SHORT, *extra]


def test_two_processes_write_once_and_evaluate_like_one(synthetic_root, tmp_path):
    out = tmp_path / "ddp"
    proc = torchrun(*base_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "2", "SOLVER.ITERS_PER_EPOCH", "10"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    log = (out / "log.txt").read_text()
    assert "using 2 process(es)" in log
    assert log.count("saved checkpoint") == 3 and log.count("start training") == 1  # rank 0 alone
    assert sorted(p for p in os.listdir(out) if p.endswith(".pth")) == ["model_1e.pth", "model_2e.pth",
                                                                          "model_final.pth"]
    assert sum(1 for _ in (out / "metrics.jsonl").open()) == 4  # 2 log lines per epoch, rank 0 only
    distributed = json.loads((out / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    single = run_tool("test_net", "--config-file", SYNTHETIC_CONFIG, "DATASETS.ROOT", synthetic_root,
                      "OUTPUT_DIR", str(tmp_path / "single"), "--ckpt", str(out / "model_final.pth"), *SHORT)
    assert single.returncode == 0, single.stderr[-3000:]
    alone = json.loads((tmp_path / "single" / "inference" / "model_final" / "synthetic_test" / "metrics.json").read_text())
    assert {k: v for k, v in alone.items() if k != "checkpoint"} == \
           {k: v for k, v in distributed.items() if k != "checkpoint"}
    assert distributed["num_queries"] == alone["num_queries"] > 0  # the sampler's padding was dropped


def test_two_processes_reach_the_parameters_of_one_with_the_same_global_batch(synthetic_root, tmp_path):
    steps = ["SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "4", "SOLVER.CHECKPOINT_PERIOD", "0"]
    two = torchrun(*base_args(synthetic_root, tmp_path / "two", *steps), "--skip-test")
    assert two.returncode == 0, two.stdout[-4000:]
    one = run_tool("train_net", *base_args(synthetic_root, tmp_path / "one", *steps), "--skip-test")
    assert one.returncode == 0, one.stderr[-3000:]
    a = torch.load(tmp_path / "two" / "model_final.pth", weights_only=False)["model"]
    b = torch.load(tmp_path / "one" / "model_final.pth", weights_only=False)["model"]
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)


def test_epochs_are_shuffled_differently_and_identically_on_every_rank(synthetic_root, tmp_path):
    out = tmp_path / "probe.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           os.path.join(REPO, "tests", "helpers", "sampler_probe.py"), SYNTHETIC_CONFIG,
                           synthetic_root, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads(out.read_text())
    rank0, rank1 = probe["ranks"]
    assert probe["batch_per_rank"] == 16  # global SOLVER.BATCH_SIZE 32 over 2 processes
    assert rank0["1"] != rank0["2"]  # a new shuffle each epoch
    assert not set(rank0["1"]) & set(rank1["1"])  # disjoint shards of one permutation

    from tan.config import load_config
    from tan.data import make_data_loader

    loader = make_data_loader(load_config(SYNTHETIC_CONFIG, ["DATASETS.ROOT", synthetic_root,
                                                             "DATALOADER.NUM_WORKERS", "0"]))
    loader.sampler.set_epoch(1)
    # the two ranks' first batches together are the single process's first batch
    assert sorted(rank0["1"] + rank1["1"]) == sorted(next(iter(loader))["indices"].tolist())


def _children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _gone(pid):
    """Whether process ``pid`` has ended (exited, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def finish(proc, console, timeout):
    """Wait for a background torchrun (killing it and its workers if the time
    runs out); returns its console output."""
    try:
        proc.wait(timeout=timeout)
    finally:
        stop_process_group(proc)
    with open(console) as f:
        return f.read()


def _wait_for(path, proc, seconds):
    """Wait for ``path`` to appear; on failure the run and its workers are stopped."""
    deadline = time.time() + seconds
    try:
        while not path.exists():
            assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {path} appeared"
            assert time.time() < deadline, f"{path} did not appear"
            time.sleep(0.2)
    except BaseException:
        stop_process_group(proc)
        raise


def test_a_killed_worker_is_restarted_and_the_run_resumes_from_the_last_checkpoint(synthetic_root, tmp_path):
    out = tmp_path / "restart"
    proc = torchrun(*base_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "4", "SOLVER.ITERS_PER_EPOCH", "25"),
                    "--skip-test", extra=["--max-restarts=1"], console=tmp_path / "console.txt")
    _wait_for(out / "model_1e.pth", proc, 300)
    workers = _children(proc.pid)
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)  # mid-epoch 2
    output = finish(proc, tmp_path / "console.txt", 600)
    assert proc.returncode == 0, output[-4000:]
    log = (out / "log.txt").read_text()
    assert "resuming from" in log and log.count("start training") == 2
    final = torch.load(out / "model_final.pth", weights_only=False)
    assert final["epoch"] == 5 and final["iteration"] == 4 * 25


def test_a_hung_peer_ends_the_run_with_a_clear_error(synthetic_root, tmp_path):
    out = tmp_path / "hung"
    proc = torchrun(*base_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "20", "SOLVER.ITERS_PER_EPOCH", "25",
                               "DISTRIBUTED.TIMEOUT", "10"), "--skip-test", console=tmp_path / "console.txt")
    _wait_for(out / "model_1e.pth", proc, 300)
    workers = _children(proc.pid)
    try:
        assert len(workers) == 2, workers
        os.kill(workers[1], signal.SIGSTOP)  # alive but silent
        # once the rank that waited has given up, kill the silent one: torchrun would otherwise
        # wait out its own grace period (30 s) for a stopped process to answer SIGTERM
        deadline = time.time() + 240
        while not _gone(workers[0]) and time.time() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.kill(workers[1], signal.SIGKILL)
        output = finish(proc, tmp_path / "console.txt", 240)
    finally:
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 1 and 4 in worker_exit_codes(output), output[-3000:]  # rank 0 saw the hang
    assert "distributed communication failed" in (out / "log.txt").read_text() + output


def test_two_nodes_on_one_machine(synthetic_root, tmp_path):
    """torchrun --nnodes=2: one process per 'node', rendezvous over TCP on localhost."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "nodes"
    args = base_args(synthetic_root, out, "SOLVER.MAX_EPOCH", "1", "SOLVER.ITERS_PER_EPOCH", "5")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={rank}",
                               "--nproc_per_node=1", "--master_addr=127.0.0.1", f"--master_port={port}",
                               os.path.join(REPO, "tools", "train_net.py"), *args, "--skip-test"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    log = (out / "log.txt").read_text()
    assert "using 2 process(es)" in log and log.count("start training") == 1
    assert (out / "model_final.pth").exists()


def test_legacy_local_rank_arguments_are_accepted():
    from tan_apps.cli.arguments import default_argument_parser

    parser = default_argument_parser("x")
    assert parser.parse_args(["--local_rank=1", "SOLVER.LR", "0.1"]).local_rank == 1
    assert parser.parse_args(["SOLVER.LR", "0.1", "--local-rank", "3"]).local_rank == 3
    assert parser.parse_args([]).local_rank is None  # then LOCAL_RANK from torchrun, else 0


def test_a_batch_size_that_does_not_divide_by_the_processes_is_refused(synthetic_root, tmp_path):
    proc = torchrun(*base_args(synthetic_root, tmp_path / "odd", "SOLVER.BATCH_SIZE", "31"))
    codes = worker_exit_codes(proc.stdout)  # 2; a rank still starting may be stopped by torchrun first (-15)
    assert proc.returncode == 1 and 2 in codes and set(codes) <= {2, -signal.SIGTERM}, proc.stdout[-3000:]
    assert "SOLVER.BATCH_SIZE = 31 is a global batch size and must be divisible by the number of processes (2)" \
        in proc.stdout
    assert not (tmp_path / "odd" / "config.yml").exists()


def test_sigterm_under_torchrun_stops_every_rank_at_one_iteration_and_resumes(synthetic_root, tmp_path):
    # 40 iterations an epoch: after the signal at iteration 10 the ranks have five log
    # iterations to agree at before the epoch ends, even on a loaded machine.
    steps = ["SOLVER.MAX_EPOCH", "2", "SOLVER.ITERS_PER_EPOCH", "40", "SOLVER.CHECKPOINT_PERIOD", "0"]
    straight = torchrun(*base_args(synthetic_root, tmp_path / "straight", *steps), "--skip-test")
    assert straight.returncode == 0, straight.stdout[-3000:]

    out = tmp_path / "term"
    proc = torchrun(*base_args(synthetic_root, out, *steps), "--skip-test", console=tmp_path / "console.txt")
    try:
        wait_for_training_record(out, proc, epoch=1, it=10)
    except BaseException:
        stop_process_group(proc)
        raise
    proc.send_signal(signal.SIGTERM)  # the agent passes it on to every worker
    output = finish(proc, tmp_path / "console.txt", 300)
    assert proc.returncode == 1  # torchrun's own status when a signal stopped it (each worker exited 143)
    saved = [n for n in os.listdir(out) if n.startswith("model_1e_")]
    assert len(saved) == 1, f"{sorted(os.listdir(out))}\n{output[-3000:]}"
    assert "interrupted by SIGTERM" in (out / "log.txt").read_text()
    again = torchrun(*base_args(synthetic_root, out, *steps), "--skip-test")
    assert again.returncode == 0, again.stdout[-3000:]
    a = torch.load(out / "model_final.pth", weights_only=False)["model"]
    b = torch.load(tmp_path / "straight" / "model_final.pth", weights_only=False)["model"]
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
