"""The reliability suite: what happens around a run when the environment fails, with nothing lost.

| scenario | where it is tested |
| --- | --- |
| kill -9 a worker (mid-epoch), resume bit-identical | tests/engine/test_resume.py, tests/study/run/test_study_flow.py |
| kill -9 the orchestrator, its worker finishing or dying alone | tests/study/run/test_study_flow.py, test_second_shell.py |
| Ctrl-C in `run` (jobs cancelled, resumable) | test_interrupt.py |
| a frozen (SIGSTOP) worker | tests/study/run/test_study_flow.py |
| torn / garbled checkpoints, every one unusable | tests/engine/test_resume.py, test_checkpoints.py |
| disk full (a failed commit) during a run | test_store_faults.py |
| read-only home; read commands never write | test_read_only_home.py |
| damaged store: truncated, garbled, empty, foreign, newer version | test_damaged_store.py |
| copied and moved home, resumed | test_relocatable_home.py |
| replaced or deleted dataset that studies use | test_datasets_in_use.py |
| bad CLI values (devices, --gpus, --parallel): nothing created | test_early_validation.py |
| export targets: symlinks, devices, folders, stdout, umask | test_export_targets.py |
| a second shell while a run holds the store; orphaned jobs | test_second_shell.py |
"""
