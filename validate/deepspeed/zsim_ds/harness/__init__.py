"""The harness, one concern a module: run_case (the parent: launch the ranks, wait, merge; the command line),
worker (one rank), case (the case folder, the plan of steps), collectives (the recording wrappers), memory (phase
markers, the allocator's trace replay and figures), buffers (DeepSpeed's buffers, the saved-tensor inventory),
timing (the profiler; host_cpu: the host's figures; sync_debug: its waits for the GPU), run_json (the result)."""
