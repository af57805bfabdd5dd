"""The presets: named starting points for a run, each only the settings that differ from ``Config``'s defaults.

They live apart from ``config.py`` because each carries its reasons (the evidence for a learning setting is
part of the setting), and those reasons grow with every committed run. Precedence stays: field default <
``--preset`` < explicit flags (``config.make_config``).
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # DeepMind's Nature DQN (Mnih et al. 2015), with Double DQN on by default (--no-double for the original).
    "nature": dict(replay_size=1_000_000, learn_start=50_000, batch_size=32, train_freq=4,
                   target_update=10_000, optimizer="rmsprop", lr=2.5e-4, rmsprop_alpha=0.95,
                   rmsprop_eps=0.01, eps_start=1.0, eps_end=0.1, eps_decay_steps=1_000_000,
                   total_steps=50_000_000, grad_clip=0.0, loss="huber"),
    # The 2017 Jetson TX1 run (docs/facts.md): the settings behind the 56 s / 46 s / 37 s table.
    "seed-tx1": dict(replay_size=50_000, learn_start=5_000, batch_size=32, train_freq=4,
                     target_update=10_000, optimizer="rmsprop", lr=2.5e-4, rmsprop_alpha=0.95,
                     rmsprop_eps=0.01, eps_start=1.0, eps_end=0.1, eps_decay_steps=1_000_000,
                     grad_clip=0.0, loss="huber", total_steps=6_000),
    # Tiny, for tests and smoke runs: a few hundred real Pong steps.
    "smoke": dict(total_steps=300, learn_start=100, replay_size=1_000, batch_size=8, train_freq=4,
                  target_update=100, log_every=100, checkpoint_every=200, eps_decay_steps=1_000,
                  noop_max=30),
    # Pong to a return of 18 on a 2-core CPU, fast. Every choice and why:
    #  num_envs 2, amp auto (bf16 where AMX has it), channels_last: the fastest rows of `make bench-pong` on a CPU (bf16 compute with
    #    fp32 master weights keeps the optimiser's precision); Adam 1e-4 with eps 1.5e-4 (Dopamine/CleanRL),
    #    which learns Pong faster than DeepMind's RMSProp; target sync every 2,000 steps (CleanRL: 1,000,
    #    Nature: 10,000) so values propagate quickly on a game with a short horizon of reward; 3-step returns
    #    (Rainbow's n) carry a point back to the hit that won it three times faster per update (a first run
    #    with 1-step returns was at -12 after 800k steps: benchmarks/results/learn-pong/first-1step);
    #    epsilon to 0.01 over the first 100k steps (Pong needs little exploration once the paddle tracks the
    #    ball, and in that first run nothing was learnt until epsilon had fallen);
    #    learn_start 20k (enough variety for the first batches); replay 200k lz4-compressed (~70 MB) with
    #    --checkpoint-replay, so a stopped run resumes with its buffer; evaluation every 50k steps over 10
    #    games at eps 0.05, stopping at a mean of 18.
    "pong-fast": dict(game="pong", total_steps=2_000_000, learn_start=20_000, replay_size=200_000,
                      replay_compress="lz4", checkpoint_replay=True, batch_size=32, train_freq=4,
                      target_update=2_000, optimizer="adam", lr=1e-4, adam_eps=1.5e-4, grad_clip=10.0,
                      eps_start=1.0, eps_end=0.01, eps_decay_steps=100_000, num_envs=2, amp="auto", n_step=3,
                      channels_last=True, eval_every=50_000, eval_episodes=10, eval_eps=0.05, target_return=18.0,
                      checkpoint_every=50_000),
    # Pong on a CUDA machine (the "GPU pipeline" issue's run): pong-fast's learning settings (the same Adam,
    #  3-step returns, target period and replay ratio 1/4), on the fastest GPU path: an env on every core but
    #  one (--num-envs auto), the replay raw in GPU memory, the update and acting captured in CUDA graphs on one
    #  stream (--learner-stream hung: benchmarks/results/cuda-h100/2026-11-27), fp32 (on an H100, bf16 graphs
    #  are no faster: 0.71 vs 0.68 ms an update). Two changes from pong-fast:
    #    epsilon to 0.05 (the evaluation's), not 0.01, over the first 100k steps. Two H100 runs trained to
    #    0.01 stalled at 12-17 at eps 0.05 from ~1M steps on (18.6 at eps 0.01 on the same weights); on the
    #    CPU, the 8-env loop trained to 0.05 was confirmed at 18.1 over 30 games at 800k steps, where its
    #    twin trained to 0.01 was at 11.4 (benchmarks/results/pong-eps05, pong-cut); this preset's own math
    #    on the CPU (fp32, the device replay's code, 8 envs) was confirmed at 18.1 at 1.1M with seed 1
    #    and 18.3 at 1.0M with seed 2 (pong-gpu-cpu-seed1, -seed2); with 15 envs, the count --num-envs auto
    #    gives on 16 cores, pong-eps05's command learnt ~300k steps later (16.5 at 1.32M: pong-eps05-15envs);
    #    evaluations of 10 games every 100k steps, a mean of 18 confirmed over 30 new games before stopping
    #    (pong-fast's way): on the H100 a 30-game evaluation took 9-21 s against ~30 s for 100k training
    #    steps, and 30-game evaluations every 150k were 29% of a run's wall clock (2026-11-27).
    "pong-gpu": dict(game="pong", total_steps=2_000_000, learn_start=20_000, replay_size=200_000,
                     replay_device="cuda", checkpoint_replay=True, batch_size=32, train_freq=4,
                     target_update=2_000, optimizer="adam", lr=1e-4, adam_eps=1.5e-4, grad_clip=10.0,
                     eps_start=1.0, eps_end=0.05, eps_decay_steps=100_000, num_envs=0, n_step=3,
                     cuda_graphs=True, cudnn_benchmark=True, eval_every=100_000, eval_episodes=10, eval_eps=0.05,
                     target_return=18.0, checkpoint_every=100_000),
    # Breakout within 2M agent steps on a 2-core CPU (the "Learning you can trust" issue). pong-fast's learning
    #  settings (Adam 1e-4, Double DQN, 3-step returns, target sync every 2,000 steps, replay ratio 1/4,
    #  batch 32), changed only where Breakout differs from Pong:
    #    epsilon to 0.01 over 250k steps, not 100k: a paddle must learn to reach a ball anywhere across the
    #    width, and the reward for it comes later than Pong's (Dopamine's Rainbow also decays over 250k);
    #    replay 1M (lz4, ~0.6 GB), not pong-fast's 200k: Breakout's states drift more as the wall empties,
    #    and the older transitions keep the early wall in the batches. Two runs with 400k ended at 80.1 and
    #    33.6 (benchmarks/results/breakout, breakout-per); the same preset with 1M and nothing else changed
    #    reached 112.6 over 30 games at 1.7M (breakout-1m), repeating the first run record for record to 400k;
    #    8 envs with the compiled update and the paired target pass in fp32 (bf16 where AMX has it, --amp auto):
    #    the fastest learning loop on this CPU (~6 s per 1000 steps on a 2-core VM without AMX);
    #    evaluation every 100k steps (10 games), stopping at a mean of 100 confirmed over 30 new games.
    #  A lost life ends the episode for learning (Config's default, as in DeepMind's Nature DQN), not for scoring.
    "breakout": dict(game="breakout", total_steps=2_000_000, learn_start=20_000, replay_size=1_000_000,
                     replay_compress="lz4", checkpoint_replay=True, batch_size=32, train_freq=4,
                     target_update=2_000, optimizer="adam", lr=1e-4, adam_eps=1.5e-4, grad_clip=10.0,
                     eps_start=1.0, eps_end=0.01, eps_decay_steps=250_000, num_envs=8, amp="auto", n_step=3,
                     channels_last=True, compile=True, fuse_target=True, eval_every=100_000, eval_episodes=10,
                     eval_eps=0.05, target_return=100.0, save_best=True, checkpoint_every=50_000),
    # Pong with sticky actions 0.25 (Machado et al. 2018; the "Learning you can trust" issue), to 18 over 30 games
    #  played with them. pong-fast's learning settings unchanged: a first sticky run with them (2 envs) learnt,
    #  but slowly, standing at 3.0M steps at 12.8 with sticky actions at eps 0.05 and 15.9 at eps 0.01 (18.3
    #  without them), so this preset changes the budget and the speed, not the learner:
    #    5M steps, not 2M (that run was still short at 3M);
    #    the breakout preset's loop (8 envs, compiled update, paired target pass), the fastest on a CPU
    #    without AMX, at the same replay ratio 1/4;
    #    --save-best, since a long run's last weights need not be its best.
    "pong-sticky": dict(game="pong", sticky_actions=0.25, total_steps=5_000_000, learn_start=20_000,
                        replay_size=200_000, replay_compress="lz4", checkpoint_replay=True, batch_size=32,
                        train_freq=4, target_update=2_000, optimizer="adam", lr=1e-4, adam_eps=1.5e-4,
                        grad_clip=10.0, eps_start=1.0, eps_end=0.01, eps_decay_steps=100_000, num_envs=8,
                        amp="auto", n_step=3, channels_last=True, compile=True, fuse_target=True,
                        eval_every=100_000, eval_episodes=10, eval_eps=0.05, target_return=18.0, save_best=True,
                        checkpoint_every=50_000),
    # CartPole-v1 with an MLP: solves (eval mean >= 195) well within 50k steps on a CPU. No max_episode_steps:
    #  --max-episode-steps' default keeps an env's own limit (CartPole-v1's 500), where the preset's 500 replaced
    #  it for the other envs it is laid under (--preset cartpole --env MountainCar-v0 played 500 steps, not 200).
    "cartpole": dict(env="CartPole-v1", total_steps=50_000, learn_start=1_000, replay_size=50_000,
                     batch_size=64, train_freq=1, target_update=500, lr=5e-4, optimizer="adam",
                     adam_eps=1e-8, eps_start=1.0, eps_end=0.02, eps_decay_steps=10_000, gamma=0.99,
                     clip_rewards=False, history=1, grad_clip=10.0, log_every=1000,
                     checkpoint_every=10_000, eval_every=5_000, eval_episodes=10, eval_eps=0.0),
}
