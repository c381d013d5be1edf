"""Whole models: a program with roles (parameters, saved activations, a KV cache, a layer count) read as a
model, and what follows from its shardings — parameter count, FLOPs, memory per device by part, fit and size
derivations, step and training time — plus model presets and optimizers as data.

- :mod:`.program` (a program read as a model: values, roles, the repeated layer and the part outside it,
  the steps the notation does not show), :mod:`.analysis` (forward plans, the derived backward, what the
  backward reads, rematerialisation, FLOPs), :mod:`.quantities` (bytes and elements of a tensor, numbers
  for JSON);
- :mod:`.memory` (bytes per device by part, the HBM fit), :mod:`.step` (step time, tokens per second,
  days to train), :mod:`.inference` (a prefill or decode step as a sum of per-op rooflines, the KV-cache read
  the attention's own op), :mod:`.serving` (a prefill and a generation end to end: time to first token,
  tokens per second, cost per million tokens), :mod:`.fit` (largest batch, fewest devices, smallest slice,
  largest model under DP, as derivations);
- :mod:`.precision`, :mod:`.zero`, :mod:`.offload` and :mod:`.trainstate` (data and one value: the precision
  recipes, ZeRO stages, offload to host memory with the host links' bandwidths, each with its source),
  :mod:`.zerostep` (which collectives of a training step run each microbatch and which once a step),
  :mod:`.conventions` (what each figure counts, said in every output);
- :mod:`.optimizers` and :mod:`.slices` (data: optimizer state per parameter, allowed slice shapes, each with
  its source), :mod:`.presets` (model configurations, each number with its source) and :mod:`.expand`
  (a preset as a program in the notation; sharding it by dim).

Imports: :mod:`shardalg.costs`, :mod:`shardalg.planning`, :mod:`shardalg.algebra`, :mod:`shardalg.notation`
and :mod:`shardalg.errors`; never :mod:`shardalg.numeric`, :mod:`shardalg.export` or :mod:`shardalg.pictures`.
A new optimizer is a row of ``optimizers.OPTIMIZERS``; a new model a row of ``presets.PRESETS``; a new
precision recipe a row of ``precision.RECIPES``; a chip's host link a row of ``offload.HOST_LINKS``.
"""
