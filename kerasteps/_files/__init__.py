"""The file helpers (private): atomic writes, one writer per place (locks),
checked paths, TensorBoard event files, and what a run learnt of its own logs."""
