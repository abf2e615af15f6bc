"""``tan-train --seeds 1 2 3``: one config trained once per seed, each seed in its own run folder
OUTPUT_DIR/seed_{n}, then every metric summed up over the seeds (docs/seeds.md).

Each seed is an ordinary ``tan-train`` run in a process of its own, so it resumes as any run does:
run the same command again after a stop and the finished seeds are kept as they are (a seed is
finished when its folder holds model_final.pth and its test results, with the config this command
gives it), the stopped one continues from its last checkpoint, and the rest start.

Launchers: "local" (this machine, ``--seeds-at-once K`` at a time, each on a GPU of its own where
there are GPUs), "slurm" (one SLURM job per seed through submitit; this command waits for them,
then writes the summary) and "submitit-local" (submitit's local executor: the SLURM path, run here).
"""
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time

import torch

from tan.config import load_config
from tan.config.setup import INT_LIMIT
from tan.engine.run_folder import CONFIG_FILE
from tan.engine.testing import results_folder
from tan_apps.seeds.summary import metrics_of, publish_summary, seed_folder
from tan.errors import TanError
from tan.utils.checkpoint_file import BEST, FINAL
from tan.utils.io import atomic_write_text, read_json
from tan.utils.logger import get_logger, setup_logger
from tan_apps.cli import signal_exits
from tan.engine.run_folder import ACCEPT_FLAG, folder_changes

LAUNCHERS = ("local", "slurm", "submitit-local")
STATUS_FILE = "seeds.json"
LOG_FILE = "seeds_log.txt"  # this command's own log; each seed logs to its folder's log.txt
POLL_SECONDS = 0.2


def add_seed_arguments(parser):
    # read as text: check_seed_arguments says in one line what a seed is, where int() would say "invalid int value"
    parser.add_argument("--seeds", nargs="+", metavar="N",
                        help="train once per seed, each in OUTPUT_DIR/seed_N, then sum every metric up over the "
                             "seeds (mean, standard deviation, each seed) in OUTPUT_DIR/seeds_summary.{json,csv}; "
                             "run the same command again to resume")
    parser.add_argument("--seeds-at-once", type=int, default=1, metavar="K",
                        help="--launcher local: train K seeds at a time, each on a GPU of its own where there are "
                             "GPUs (default 1: one after the other)")
    parser.add_argument("--launcher", choices=LAUNCHERS, default="local",
                        help="where the seeds run: this machine (local, the default), one SLURM job each (slurm, "
                             "through submitit: pip install 'tan[slurm]'), or submitit's local executor")
    parser.add_argument("--slurm", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of the SLURM jobs, as submitit's AutoExecutor takes it without its "
                             "slurm_ prefix: partition=gpu, timeout_min=2880, gpus_per_node=1, cpus_per_task=8 ...")


def seed_number(text):
    """The seed ``text`` of --seeds names: a whole number of 0 or more that config SEED can hold (each seed
    is a run's SEED, trained in OUTPUT_DIR/seed_N)."""
    text = str(text).strip()
    if not re.fullmatch(r"\d+", text):
        raise TanError(f"--seeds {text}: seeds are whole numbers of 0 or more (each trains in OUTPUT_DIR/seed_N)")
    if int(text) > INT_LIMIT:
        raise TanError(f"--seeds {text}: seeds are whole numbers of 0 to {INT_LIMIT}, the values config SEED takes")
    return int(text)


def check_seed_arguments(args):
    """Refuse what cannot go with --seeds, before anything runs."""
    if not args.seeds:
        if args.launcher != "local" or args.slurm or args.seeds_at_once != 1:
            raise TanError("--launcher, --slurm and --seeds-at-once go with --seeds")
        return
    args.seeds = [seed_number(text) for text in args.seeds]
    if len(set(args.seeds)) != len(args.seeds):
        raise TanError(f"--seeds: each seed once, got {args.seeds}")
    keys = args.opts[0::2]
    if "SEED" in keys:
        raise TanError("--seeds sets SEED for each run; leave SEED out of the overrides")
    if args.seeds_at_once < 1:
        raise TanError(f"--seeds-at-once: expected at least 1, got {args.seeds_at_once}")
    if args.slurm and args.launcher != "slurm":
        raise TanError("--slurm parameters go with --launcher slurm")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise TanError("--seeds starts a process per seed itself: run it without torchrun")
    _slurm_parameters(args.slurm)


def _slurm_parameters(pairs):
    parameters = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise TanError(f"--slurm {pair!r}: expected KEY=VALUE, e.g. partition=gpu")
        parameters[key] = int(value) if value.isdigit() else value
    return parameters


class SeedPlan:
    """The seeds of one command: each one's folder, the command that trains it, and its config."""

    def __init__(self, args):
        self.args = args
        opts = list(args.opts)
        keys = opts[0::2]
        if "OUTPUT_DIR" in keys:  # the seeds' parent folder; each seed gets its own OUTPUT_DIR below it
            at = 2 * keys.index("OUTPUT_DIR")
            del opts[at:at + 2]
        self.base_cfg = load_config(args.config_file, args.opts)
        self.output_dir = self.base_cfg.OUTPUT_DIR
        self.opts = opts
        # the GPUs the local launcher hands out, one per running seed
        self.gpus = seed_gpus(self.base_cfg.MODEL.DEVICE, torch.cuda.device_count(),
                              os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.folders = {s: seed_folder(self.output_dir, s) for s in args.seeds}

    def overrides(self, seed):
        return self.opts + ["SEED", str(seed), "OUTPUT_DIR", self.folders[seed]]

    def command(self, seed):
        flags = (["--skip-test"] if self.args.skip_test else []) + \
                ([ACCEPT_FLAG] if getattr(self.args, "accept_config_changes", False) else [])
        return [sys.executable, "-m", "tan_apps.commands.train", "--config-file", self.args.config_file, *flags,
                *self.overrides(seed)]

    def finished(self, seed):
        """Whether seed ``seed`` is done with this command's config: final model and test results there."""
        folder = self.folders[seed]
        if not os.path.isfile(os.path.join(folder, FINAL)) or not os.path.isfile(os.path.join(folder, CONFIG_FILE)):
            return False
        wanted = load_config(self.args.config_file, self.overrides(seed))
        if any(c.affects_results for c in folder_changes(wanted)):
            return False  # another config: the seed's own run says what differs (or continues with the flag)
        if self.args.skip_test:
            return True
        return all(os.path.isfile(os.path.join(results, name, "metrics.json"))
                   for results in tested_folders(folder) for name in wanted.DATASETS.TEST)


def run_seeds(args):
    """Train every seed of ``args.seeds`` not finished yet, then write and print the summary."""
    plan = SeedPlan(args)
    if args.launcher == "local" and plan.gpus and args.seeds_at_once > len(plan.gpus):  # before anything is written
        raise TanError(f"--seeds-at-once {args.seeds_at_once}: there are {len(plan.gpus)} GPUs for the seeds "
                       f"({', '.join(plan.gpus)}); each seed gets one of its own, so at most {len(plan.gpus)} run at once")
    os.makedirs(plan.output_dir, exist_ok=True)
    setup_logger(plan.output_dir, filename=LOG_FILE)
    logger = get_logger("seeds")
    done = [s for s in args.seeds if plan.finished(s)]
    todo = [s for s in args.seeds if s not in done]
    for seed in done:
        logger.info("seed %d: finished in %s, kept as it is", seed, plan.folders[seed])
    status = {s: "finished before" for s in done}
    _write_status(plan, status)
    if todo:
        logger.info("training seeds %s (%s launcher), each in %s", ", ".join(map(str, todo)), args.launcher,
                    seed_folder(plan.output_dir, "N"))
        launch = _run_local if args.launcher == "local" else _run_submitit
        codes = launch(plan, todo, status)
        failed = {s: code for s, code in codes.items() if code != 0}
        if failed:
            raise TanError("seed " + ", ".join(f"{s} ended with exit status {c} (its output above, and "
                                               f"{os.path.join(plan.folders[s], 'log.txt')})" for s, c in failed.items())
                           + "; once what it says is fixed, the same command resumes: finished seeds are kept")
    if args.skip_test:
        logger.info("all %d seeds trained; test them and sum them up with: tan-test --ckpt %s", len(args.seeds),
                    " ".join(os.path.join(plan.folders[s], FINAL) for s in args.seeds))
        return None
    return summarize_folders(plan.output_dir, plan.folders, plan.base_cfg.DATASETS.TEST)


def summarize_folders(output_dir, folders, datasets):
    """Read each seed folder's test results on ``datasets`` (inference/model_final and model_best), write and
    log the summary; results of other datasets in those folders (an earlier config's, a manual tan-test's)
    are not read."""
    by_seed = {}
    for seed, folder in folders.items():
        found = {}
        for results in tested_folders(folder):
            for name in datasets:
                path = os.path.join(results, name, "metrics.json")
                if os.path.isfile(path):
                    found[(os.path.basename(results), name)] = metrics_of(read_json(path, f"results file {path!r}"))
        by_seed[seed] = found
    return publish_summary(output_dir, by_seed, folders, get_logger("seeds"))


def tested_folders(folder):
    """Where the test after training puts the results of run folder ``folder``: its final model's, and its
    best model's where it kept one (tan.engine.trainer.Trainer.test)."""
    models = [FINAL] + ([BEST] if os.path.isfile(os.path.join(folder, BEST)) else [])
    return [results_folder(folder, os.path.join(folder, m)) for m in models]


def _write_status(plan, status):
    """OUTPUT_DIR/seeds.json: which seeds this command runs, where, and how each stands."""
    record = {"config_file": plan.args.config_file, "overrides": plan.opts, "launcher": plan.args.launcher,
              "seeds": {str(s): {"folder": plan.folders[s], "status": status.get(s, "to do")} for s in plan.args.seeds}}
    atomic_write_text(os.path.join(plan.output_dir, STATUS_FILE), json.dumps(record, indent=2) + "\n")


def _die_with_parent():
    """In a seed's process: SIGTERM when this command's process dies (Linux), so that a killed command
    never leaves a seed training on alone (it stops with a checkpoint, as for any SIGTERM)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _run_local(plan, seeds, status):
    """Train ``seeds`` here, ``--seeds-at-once`` at a time; {seed: exit status}. A Ctrl-C or SIGTERM of this
    command is passed on to the running seeds, which stop with a checkpoint; then it is raised again."""
    logger = get_logger("seeds")
    gpus, at_once = plan.gpus, plan.args.seeds_at_once
    pending, running, codes = list(seeds), {}, {}
    try:
        while pending or running:
            while pending and len(running) < at_once:
                seed = pending.pop(0)
                env = dict(os.environ)
                if gpus:  # a GPU no running seed has, named as this command sees it
                    taken = {gpu for _, gpu in running.values()}
                    env["CUDA_VISIBLE_DEVICES"] = next(g for g in gpus if g not in taken)
                elif at_once > 1:  # seeds without a GPU of their own share the cores instead of each taking them all
                    env.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // at_once)))
                logger.info("seed %d: training in %s%s", seed, plan.folders[seed],
                            f" on GPU {env['CUDA_VISIBLE_DEVICES']}" if gpus else "")
                running[seed] = (subprocess.Popen(plan.command(seed), env=env, start_new_session=True,
                                                  preexec_fn=_die_with_parent), env.get("CUDA_VISIBLE_DEVICES"))
                status[seed] = "training"
                _write_status(plan, status)
            for seed, (proc, _) in list(running.items()):
                if proc.poll() is not None:
                    codes[seed] = proc.returncode
                    status[seed] = "trained" if proc.returncode == 0 else f"ended with exit status {proc.returncode}"
                    del running[seed]
                    _write_status(plan, status)
                    logger.info("seed %d: %s", seed, status[seed])
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (tan_apps.cli.signal_exits.Terminated)
        sent = signal.SIGTERM if isinstance(stop, signal_exits.Terminated) else signal.SIGINT
        for seed, (proc, _) in running.items():
            proc.send_signal(sent)
        for seed, (proc, _) in running.items():
            proc.wait()
            status[seed] = f"stopped (exit status {proc.returncode}); resumes when the command runs again"
        _write_status(plan, status)
        raise
    return codes


def seed_gpus(device, count, visible):
    """The GPUs the local launcher hands out, one per running seed, as CUDA_VISIBLE_DEVICES entries: those of
    this command's own CUDA_VISIBLE_DEVICES (``visible``), else 0 .. ``count`` - 1; none when MODEL.DEVICE
    (``device``) is the CPU or names one GPU itself ("cuda:1": that seed's choice is kept)."""
    if not count or device not in ("auto", "cuda"):
        return []
    if visible:
        return [g.strip() for g in visible.split(",") if g.strip()][:count]
    return [str(g) for g in range(count)]


def run_seed_command(command):
    """One seed's training, in a submitit job: the same process as the local launcher starts. Returns its exit
    status. A stop of the job (submitit's cancel sends SIGINT) is passed on, and the training is waited for, so
    that it stops with a checkpoint instead of being killed with the job."""
    proc = subprocess.Popen(command, start_new_session=True, preexec_fn=_die_with_parent)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


# submitit's own names for these parameters; the others are SLURM's (slurm_ prefixed)
_SUBMITIT_KEYS = ("timeout_min", "gpus_per_node", "tasks_per_node", "cpus_per_task", "mem_gb", "nodes", "name")


def _executor(plan, folder):
    """The submitit executor of ``plan``'s launcher: SLURM, or submitit's local executor."""
    try:
        import submitit
    except ImportError:
        raise TanError(f"--launcher {plan.args.launcher} needs submitit: pip install 'tan[slurm]'") from None
    if plan.args.launcher == "submitit-local":
        executor = submitit.LocalExecutor(folder=folder)
        executor.update_parameters(timeout_min=60 * 24)
        return executor
    try:
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    except Exception as e:  # noqa: BLE001 - submitit says why there is no SLURM here (no sbatch, ...)
        raise TanError(f"--launcher slurm: no SLURM cluster to submit to from this machine ({e})") from None
    gpus = {} if plan.base_cfg.MODEL.DEVICE == "cpu" else {"gpus_per_node": 1}
    parameters = {"timeout_min": 60 * 24, "tasks_per_node": 1, **gpus, **_slurm_parameters(plan.args.slurm)}
    try:
        executor.update_parameters(**{k if k in _SUBMITIT_KEYS else f"slurm_{k}": v for k, v in parameters.items()})
    except (ValueError, TypeError) as e:  # an unknown key: submitit lists the ones it takes
        raise TanError(f"--slurm: {e}") from None
    return executor


def _run_submitit(plan, seeds, status):
    """One submitit job per seed (SLURM, or submitit's local executor); waits for them. {seed: exit status}.
    A job that fails is recorded and the others are still waited for; a stop of this command leaves SLURM
    jobs running (seeds.json says so) and cancels local ones."""
    logger = get_logger("seeds")
    folder = os.path.join(plan.output_dir, "submitit")
    executor = _executor(plan, folder)
    jobs = {}
    for seed in seeds:
        jobs[seed] = executor.submit(run_seed_command, plan.command(seed))
        status[seed] = f"submitted (job {jobs[seed].job_id})"
        logger.info("seed %d: job %s, logs in %s", seed, jobs[seed].job_id, folder)
    _write_status(plan, status)
    codes = {}
    try:
        for seed, job in jobs.items():
            try:
                codes[seed] = job.result()
                status[seed] = "trained" if codes[seed] == 0 else f"ended with exit status {codes[seed]}"
            except Exception as e:  # noqa: BLE001 - the job's own failure, named with its log
                codes[seed] = -1
                status[seed] = f"job {job.job_id} failed ({type(e).__name__}); its log: {job.paths.stderr}"
                logger.error("seed %d: %s", seed, status[seed])
            _write_status(plan, status)
    except KeyboardInterrupt:
        for seed, job in jobs.items():
            if seed in codes:
                continue
            if plan.args.launcher == "slurm":
                status[seed] = f"job {job.job_id} still running on SLURM; run the command again once it has ended"
            else:
                job.cancel()
                status[seed] = f"job {job.job_id} cancelled; resumes when the command runs again"
        _write_status(plan, status)
        raise
    return codes
