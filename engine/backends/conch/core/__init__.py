"""The engine thread's core: typed commands, the failure policy and the step (schedule -> forward -> verify/sample ->
update -> observe), with the scheduler, the batch, the sequences and the sampler it drives."""
