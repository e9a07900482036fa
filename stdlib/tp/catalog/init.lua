-- tp.catalog: what the world has, read by every package: tp.catalog.models (model architectures,
-- exact parameter counts, FLOPs per token) and tp.catalog.hardware (GPU datasheets: memory, peak
-- dense TFLOP/s per precision, TDP, price per GPU-hour). docs/DESIGN.md, HARDWARE.md.
return require('tp').package('tp.catalog', {
  'models', 'hardware',
})
