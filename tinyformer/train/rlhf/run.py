"""The run folder of `tinyformer train rlhf`: what `--resume` reads, and what is refused before
any work.

Each step (SFT, reward model, PPO, DPO) is a run of its own in a subfolder of --out-dir, and
every checkpoint of every step also keeps the RLHF run's settings and identity (a random id
drawn when the run starts) and the minutes the step has taken. `--resume` takes the settings
saved with the SFT step; a finished step is kept, an interrupted one continues from its last
checkpoint, and a step's checkpoint with another identity (left by a run that --overwrite
replaced) starts over. A GPT pretraining of --init that was stopped before its end is
continued under --resume, and refused as a pretrained model otherwise.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyformer.models.gpt import GPTConfig
from tinyformer.train.loop import saved_settings
from tinyformer.train.memory import (
    check_batch_fits,
    check_data_fits,
    sequence_floor,
    transformer_floor,
)
from tinyformer.train.rlhf.config import TrainRLHFConfig
from tinyformer.train.state import load_run

__all__ = ["Stage", "check_init_folder", "check_sizes", "run_settings", "stage", "stopped_at"]


@dataclass
class Stage:
    """One step's run folder, and what each of its checkpoints keeps beside the step's own
    state: the settings and the identity of the RLHF run (a step left by a replaced run is
    not continued) and the minutes the step has taken, over every session."""

    folder: Path
    record: dict[str, Any]  # {"config": the run's settings, "run": its identity}
    saved: tuple[dict, dict] | None = None  # (model state, meta) of the checkpoint to go on from
    spent: float = 0.0  # minutes taken in earlier sessions
    start: float = field(default_factory=time.perf_counter)

    @property
    def minutes(self) -> float:
        return self.spent + (time.perf_counter() - self.start) / 60

    def meta(self) -> dict[str, Any]:
        return {"rlhf": {**self.record, "minutes": self.minutes}}


def run_settings(cfg: TrainRLHFConfig) -> tuple[TrainRLHFConfig, dict[str, Any]]:
    """The run's settings and its record for the checkpoints (settings and identity): under
    --resume those its SFT step saved (flags given now that they override are listed in a
    note), or this command's where the run had not got past pretraining --init."""
    path = Path(cfg.out_dir) / "sft" / "ckpt.npz"
    if cfg.resume and (path.exists() or stopped_at(Path(cfg.init)) is None):
        others = sorted(Path(cfg.out_dir).glob("*ckpt.npz")) + sorted(
            Path(cfg.out_dir).glob("*/ckpt.npz")
        )
        if not path.exists() and others:
            raise ValueError(
                f"{others[0]} holds a run of another command: resume it with the command that "
                f"wrote it"
            )
        _, meta = load_run(path, resume=True)  # no checkpoint: says so, naming the file
        record = meta.get("rlhf")
        if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
            raise ValueError(f"{path} holds a run of another command: resume it with the "
                             f"command that wrote it")  # fmt: skip
        keep = {"progress": cfg.progress, "resume": True, "out_dir": cfg.out_dir,
                "device": cfg.device}  # fmt: skip
        resumed = saved_settings(cfg, record["config"], path, keep)
        return resumed, {"config": record["config"], "run": str(record.get("run"))}
    # a random identity (not from the seeded generators, whose draws it would change)
    return cfg, {"config": dataclasses.asdict(cfg), "run": uuid.uuid4().hex}


def stage(cfg: TrainRLHFConfig, record: dict[str, Any], name: str) -> Stage:
    """The step `name` of the run `record` names: its folder, and under --resume the checkpoint
    it left there. A checkpoint of another run (one that --overwrite replaced) is not
    continued: the step starts over, and a note says so."""
    folder = Path(cfg.out_dir) / name
    path = folder / "ckpt.npz"
    if not (cfg.resume and path.exists()):
        return Stage(folder, record)
    state, meta = load_run(path, resume=True)
    mine = meta.get("rlhf")
    if not isinstance(mine, dict) or mine.get("run") != record["run"]:
        print(f"note: {path} is not this run's (a replaced run's?): {name} starts over")
        return Stage(folder, record)
    spent = mine.get("minutes")
    return Stage(folder, record, (state, meta), spent if isinstance(spent, float) else 0.0)


def stopped_at(init: Path) -> tuple[int, int] | None:
    """(iteration, iterations) of a training run in the folder `init` that stopped before its
    end (Ctrl-C, or a stopped `train rlhf`): a model it would be wrong to take as pretrained."""
    if not (init / "ckpt.npz").is_file():
        return None
    _, meta = load_run(init)
    if not is_gpt_run(meta):
        raise ValueError(
            f"--init {init} holds a run of another command, not a GPT run (`tinyformer train "
            f"gpt`): name a GPT run folder, or a new folder to pretrain one in"
        )
    done, total = meta.get("iteration"), meta.get("train_config", {}).get("iters")
    if isinstance(done, int) and isinstance(total, int) and done < total:
        return done, total
    return None


def is_gpt_run(meta: dict[str, Any]) -> bool:
    """Whether a checkpoint's metadata is a GPT's (what `load_model` reads): a tokenizer, and
    sizes that are all GPTConfig's (a ViLBERT or BERT run has sizes of other names)."""
    sizes = meta.get("model_config")
    names = {f.name for f in dataclasses.fields(GPTConfig)}
    return "tokenizer" in meta and isinstance(sizes, dict) and set(sizes) <= names


def check_init_folder(init: str) -> None:
    """Refuse an --init that cannot be a new run folder for the pretraining."""
    if Path(init).suffix == ".npz":  # a file meant, and missing: not a folder to make
        raise ValueError(f"--init {init}: no such checkpoint file")
    found = sorted(Path(init).glob("*/ckpt.npz"))
    if found:  # e.g. another command's run folder: its runs are in subfolders
        raise ValueError(
            f"--init {init} holds no GPT checkpoint (ckpt.npz) but other runs ({found[0]}): "
            f"name a GPT run folder, or a new folder to pretrain one in"
        )


def check_sizes(cfg: TrainRLHFConfig, model: GPTConfig) -> None:
    """Refuse sizes that could never fit in memory, before any work (see memory.py): the
    training steps, PPO's scoring of a whole rollout in one forward, and the sequences the
    counts of demonstrations, pairs and held-out prompts ask for."""
    c, t = model.n_embd, cfg.seq_len
    step = transformer_floor(t, model.n_layer, c, 4 * c, model.vocab_size)
    what = f"this GPT on {t} tokens"
    # a sequence too long for even one pair: the lengths are to blame, not the batch sizes
    check_data_fits(f"--prompt-len {cfg.prompt_len} --completion-len {cfg.completion_len}",
                    2 * step, f"the activations of one pair of {t}-token sequences")  # fmt: skip
    # the reward model and DPO read a pair's two sequences in one forward
    check_batch_fits(cfg.batch_size, 2 * step, what, cfg.device, "--batch-size")
    check_batch_fits(cfg.minibatch, step, what, cfg.device, "--minibatch")
    # the policy's and the SFT policy's logits of the whole rollout
    scoring = sequence_floor(t, 2 * model.vocab_size + c)
    check_batch_fits(cfg.rollout, scoring, what, cfg.device, "--rollout")
    # a sequence as text (a str of t characters), its ids as a list and as an int64 array
    ids = (49 + t) + (56 + 8 * t) + 8 * t
    k = cfg.samples_per_prompt
    counts = (
        (f"--demos {cfg.demos}", cfg.demos * ids, "the demonstrations"),
        (f"--prompts {cfg.prompts} --samples-per-prompt {k}",
         cfg.prompts * k * (k - 1) * ids, "up to prompts * K (K - 1) / 2 preference pairs"),
        (f"--eval-prompts {cfg.eval_prompts}", cfg.eval_prompts * ids, "the held-out prompts"),
    )  # fmt: skip
    for flags, nbytes, what in counts:
        check_data_fits(flags, nbytes, what)
