// LoRA on a CUDA model is refused for now, naming the option (config.lora) — never wrong
// numbers: a CUDA transformer with a LoRA config, addLora on a CUDA model, and the store
// operations LoRA needs that CUDA stores do not have (freeze, merge). Skipped with a visible
// message without a CUDA build and a GPU (the CUDA emulator, `npm run build:cuda-emulator`,
// counts).
import t from 'tap';

import {
  ParamStore,
  Transformer,
  addLora,
  modelAddon,
  modelConfig,
  parameterLayout,
  type ModelConfigInput,
} from '../../lib/model/index.js';
import { cudaAvailable, loadAddon } from '../../lib/native/index.js';

const noGpu = !cudaAvailable()
  ? `no CUDA device: ${loadAddon().cudaStatus().reason}`
  : !modelAddon().modelOpsDevices().includes('cuda')
    ? 'no CUDA device: this build has no CUDA model kernels'
    : false;

const base: ModelConfigInput = { layers: 2, width: 16, heads: 2, kvHeads: 1, headDim: 8, window: 0, vocab: 29, context: 32, ffn: 12, ropeTheta: 1000, normEps: 1e-5, initStd: 0.1, swiglu: 'clamped' };

t.test('LoRA on a CUDA model is refused naming config.lora', { skip: noGpu }, async (t) => {
  const c = modelConfig(base, { lora: { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] } });
  t.throws(() => Transformer.create(c, 1, { device: 'cuda' }), { message: /config\.lora \(LoRA adapters\) is not supported by the CUDA transformer yet: run the model on the CPU \(device 'cpu'\)/ });
  const gpu = Transformer.create(base, 1, { device: 'cuda' });
  t.throws(() => addLora(gpu, { rank: 2, alpha: 4, targets: ['q_proj'] }), { message: /config\.lora \(LoRA adapters\) is not supported on cuda:0 models yet: load or create the model with device 'cpu'/ });
  t.notOk(gpu.disposed, 'the model is left as it was');
  t.throws(() => gpu.store.freeze(['embed.weight']), { message: /freezing parameters is supported on CPU stores only/ });
  const store = ParamStore.fromSpecs(parameterLayout(c), 1, { device: 'cuda' });
  t.throws(() => store.mergeLora({ weight: 'layers.0.attn.q.weight', rowOffset: 0, loraA: 'layers.0.attn.q.lora_a', loraB: 'layers.0.attn.q.lora_b', scale: 2 }), { message: /mergeLora runs on CPU stores only/ });
  store.dispose();
  gpu.dispose();
});
