// Our parameters expected from a tiny checkpoint's HF tensors, by explicit index formulas:
// gate_proj/up_proj rows stacked; gpt-oss experts de-interleaved (gate = even columns of
// gate_up_proj) and transposed; down_proj transposed; MXFP4 decoded from the E2M1 definition.
import { DIMS } from './checkpoint.js';

type Values = Map<string, Float64Array>;

/** Our name → HF name for the tensors that are plain copies. */
function copies(arch: string, layers: number, tied: boolean, names: Set<string>): [string, string][] {
  const out: [string, string][] = [['embed.weight', 'model.embed_tokens.weight'], ['norm.weight', 'model.norm.weight']];
  if (!tied) out.push(['lm_head.weight', 'lm_head.weight']);
  for (let i = 0; i < layers; i++) {
    const p = `layers.${i}.`;
    const h = `model.layers.${i}.`;
    out.push([`${p}attn_norm.weight`, `${h}input_layernorm.weight`], [`${p}mlp_norm.weight`, `${h}post_attention_layernorm.weight`]);
    for (const x of ['q', 'k', 'v', 'o']) {
      out.push([`${p}attn.${x}.weight`, `${h}self_attn.${x}_proj.weight`]);
      if (names.has(`${h}self_attn.${x}_proj.bias`)) out.push([`${p}attn.${x}.bias`, `${h}self_attn.${x}_proj.bias`]);
    }
    if (arch === 'Qwen3ForCausalLM') out.push([`${p}attn.q_norm.weight`, `${h}self_attn.q_norm.weight`], [`${p}attn.k_norm.weight`, `${h}self_attn.k_norm.weight`]);
    if (arch === 'GptOssForCausalLM') {
      out.push([`${p}attn.sinks`, `${h}self_attn.sinks`], [`${p}mlp.router.weight`, `${h}mlp.router.weight`], [`${p}mlp.router.bias`, `${h}mlp.router.bias`]);
      out.push([`${p}mlp.experts.down.bias`, `${h}mlp.experts.down_proj_bias`]);
    } else {
      out.push([`${p}mlp.down.weight`, `${h}mlp.down_proj.weight`]);
      if (names.has(`${h}mlp.down_proj.bias`)) out.push([`${p}mlp.down.bias`, `${h}mlp.down_proj.bias`]);
    }
  }
  return out;
}

/** E2M1 value of a 4-bit code. */
function e2m1(code: number): number {
  const sign = code & 8 ? -1 : 1;
  const e = (code >> 1) & 3;
  const m = code & 1;
  return sign * (e === 0 ? m * 0.5 : (1 + m / 2) * 2 ** (e - 1));
}

/** Logical [rows, cols] values of one MXFP4 tensor's expert e: blocks [E, rows, cols/32, 16], scales [E, rows, cols/32]. */
export function mxfp4Logical(blocks: Uint8Array, scales: Uint8Array, e: number, rows: number, cols: number, row: number, col: number): number {
  const g = cols / 32;
  const byte = blocks[((e * rows + row) * g + (col >> 5)) * 16 + ((col & 31) >> 1)];
  const code = col & 1 ? byte >> 4 : byte & 15;
  return e2m1(code) * 2 ** (scales[(e * rows + row) * g + (col >> 5)] - 127);
}

/**
 * Expected parameters (float64 values) of `arch` from the HF values. For gpt-oss MXFP4, pass the
 * raw blocks/scales in `mxfp4` (by HF name) instead of gate_up_proj / down_proj values.
 */
export function expectedParams(arch: string, hf: Values, options: { tied?: boolean; mxfp4?: Map<string, Uint8Array> } = {}): Map<string, Float64Array> {
  const { layers, D, F, E } = DIMS;
  const tied = options.tied ?? arch === 'Qwen3ForCausalLM';
  const names = new Set(hf.keys());
  const out = new Map<string, Float64Array>();
  for (const [ours, h] of copies(arch, layers, tied, names)) out.set(ours, hf.get(h)!);
  for (let i = 0; i < layers; i++) {
    const p = `layers.${i}.`;
    const h = `model.layers.${i}.mlp.`;
    if (arch !== 'GptOssForCausalLM') {
      const g = hf.get(`${h}gate_proj.weight`)!;
      const u = hf.get(`${h}up_proj.weight`)!;
      const gu = new Float64Array(2 * F * D);
      for (let r = 0; r < F; r++) for (let d = 0; d < D; d++) {
        gu[r * D + d] = g[r * D + d];
        gu[(F + r) * D + d] = u[r * D + d];
      }
      out.set(`${p}mlp.gate_up.weight`, gu);
      if (names.has(`${h}gate_proj.bias`)) out.set(`${p}mlp.gate_up.bias`, Float64Array.from([...hf.get(`${h}gate_proj.bias`)!, ...hf.get(`${h}up_proj.bias`)!]));
      continue;
    }
    const gu = new Float64Array(E * 2 * F * D);
    const down = new Float64Array(E * D * F);
    const mx = options.mxfp4;
    for (let e = 0; e < E; e++) {
      for (let r = 0; r < 2 * F; r++) {
        // ours row r: gate j = r (r < F) is HF column 2j; up j = r - F is column 2j + 1
        const c = r < F ? 2 * r : 2 * (r - F) + 1;
        for (let d = 0; d < D; d++) {
          gu[(e * 2 * F + r) * D + d] = mx
            ? mxfp4Logical(mx.get(`${h}experts.gate_up_proj_blocks`)!, mx.get(`${h}experts.gate_up_proj_scales`)!, e, 2 * F, D, c, d)
            : hf.get(`${h}experts.gate_up_proj`)![(e * D + d) * 2 * F + c];
        }
      }
      for (let d = 0; d < D; d++) for (let f = 0; f < F; f++) {
        down[(e * D + d) * F + f] = mx ? mxfp4Logical(mx.get(`${h}experts.down_proj_blocks`)!, mx.get(`${h}experts.down_proj_scales`)!, e, D, F, d, f) : hf.get(`${h}experts.down_proj`)![(e * F + f) * D + d];
      }
    }
    out.set(`${p}mlp.experts.gate_up.weight`, gu);
    out.set(`${p}mlp.experts.down.weight`, down);
    const b = hf.get(`${h}experts.gate_up_proj_bias`)!;
    const gb = new Float64Array(E * 2 * F);
    for (let e = 0; e < E; e++) for (let j = 0; j < F; j++) {
      gb[e * 2 * F + j] = b[e * 2 * F + 2 * j];
      gb[e * 2 * F + F + j] = b[e * 2 * F + 2 * j + 1];
    }
    out.set(`${p}mlp.experts.gate_up.bias`, gb);
  }
  return out;
}

/** Which of our parameters are matrices (kept in bf16 when asked). */
export function isMatrix(name: string): boolean {
  return /(^embed\.weight$|^lm_head\.weight$|attn\.[qkvo]\.weight$|mlp\.gate_up\.weight$|mlp\.down\.weight$|experts\.(gate_up|down)\.weight$)/.test(name);
}
