/**
 * The `calculate` tool's evaluator: the subset of Python expressions its allowed characters
 * can spell (`0-9 + - * / ( ) .` and spaces: `+ - * / // **`, unary signs, parentheses, int and
 * float literals), with Python's int/float rules, then `str(round(float(x), 2))`.
 * @module
 */
import { ToolError } from '../../tools.js';
import { pyFloatRepr, pyRound2 } from '../../pyjson.js';

interface Val {
  v: number;
  int: boolean;
}

type Tok = { t: 'num'; text: string } | { t: 'op'; text: string } | { t: 'end' };

const SYNTAX = 'invalid syntax (<string>, line 1)';

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ') {
      i++;
      continue;
    }
    if ((c >= '0' && c <= '9') || (c === '.' && src[i + 1] >= '0' && src[i + 1] <= '9')) {
      let j = i;
      while (j < src.length && src[j] >= '0' && src[j] <= '9') j++;
      if (src[j] === '.') {
        j++;
        while (j < src.length && src[j] >= '0' && src[j] <= '9') j++;
      }
      out.push({ t: 'num', text: src.slice(i, j) });
      i = j;
      continue;
    }
    if ((c === '*' || c === '/') && src[i + 1] === c) {
      out.push({ t: 'op', text: c + c });
      i += 2;
      continue;
    }
    if ('+-*/()'.includes(c)) {
      out.push({ t: 'op', text: c });
      i++;
      continue;
    }
    throw new ToolError(SYNTAX);
  }
  out.push({ t: 'end' });
  return out;
}

function numberOf(text: string): Val {
  if (!text.includes('.')) {
    if (text.length > 1 && text[0] === '0' && /[1-9]/.test(text)) {
      throw new ToolError(
        'leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers (<string>, line 1)',
      );
    }
    return { v: Number(text), int: true };
  }
  return { v: Number(text.endsWith('.') ? `${text}0` : text), int: false };
}

function typeName(x: Val): string {
  return x.int ? 'int' : 'float';
}

/** Evaluates a Python arithmetic expression (see module doc); throws ToolError like Python would. */
export function evaluatePythonArithmetic(src: string): number {
  const toks = tokenize(src);
  let p = 0;
  const peek = () => toks[p];
  const take = () => toks[p++];
  const isOp = (s: string) => {
    const k = peek();
    return k.t === 'op' && k.text === s;
  };

  const atom = (): Val => {
    const k = take();
    let val: Val;
    if (k.t === 'num') val = numberOf(k.text);
    else if (k.t === 'op' && k.text === '(') {
      if (isOp(')')) throw new ToolError("'tuple' object cannot be interpreted as a number");
      val = expr();
      if (!isOp(')')) throw new ToolError(SYNTAX);
      take();
    } else throw new ToolError(SYNTAX);
    if (isOp('(')) throw new ToolError(`'${typeName(val)}' object is not callable`);
    return val;
  };
  const power = (): Val => {
    const base = atom();
    if (isOp('**')) {
      take();
      const exp = unary();
      if (base.v === 0 && exp.v < 0)
        throw new ToolError(
          base.int && exp.int ? '0.0 cannot be raised to a negative power' : 'zero to a negative power',
        );
      const int = base.int && exp.int && exp.v >= 0;
      return { v: Math.pow(base.v, exp.v), int };
    }
    return base;
  };
  const unary = (): Val => {
    if (isOp('-')) {
      take();
      const x = unary();
      return { v: -x.v, int: x.int };
    }
    if (isOp('+')) {
      take();
      return unary();
    }
    return power();
  };
  const term = (): Val => {
    let left = unary();
    for (;;) {
      const k = peek();
      if (k.t !== 'op' || !['*', '/', '//'].includes(k.text)) return left;
      take();
      const right = unary();
      if (k.text === '*') left = { v: left.v * right.v, int: left.int && right.int };
      else if (k.text === '/') {
        if (right.v === 0) throw new ToolError(left.int && right.int ? 'division by zero' : 'float division by zero');
        left = { v: left.v / right.v, int: false };
      } else {
        if (right.v === 0)
          throw new ToolError(
            left.int && right.int ? 'integer division or modulo by zero' : 'float floor division by zero',
          );
        left = { v: Math.floor(left.v / right.v), int: left.int && right.int };
      }
    }
  };
  const expr = (): Val => {
    let left = term();
    for (;;) {
      if (isOp('+')) {
        take();
        const r = term();
        left = { v: left.v + r.v, int: left.int && r.int };
      } else if (isOp('-')) {
        take();
        const r = term();
        left = { v: left.v - r.v, int: left.int && r.int };
      } else return left;
    }
  };
  if (peek().t === 'end') throw new ToolError(SYNTAX);
  const result = expr();
  if (peek().t !== 'end') throw new ToolError(SYNTAX);
  return result.v;
}

/** The `calculate` tool: allowed characters only, then `str(round(float(eval(expr)), 2))`. */
export function calculate(expression: string): string {
  for (const ch of expression)
    if (!'0123456789+-*/(). '.includes(ch)) throw new ToolError('Invalid characters in expression');
  const v = evaluatePythonArithmetic(expression);
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : v < 0 ? '-inf' : 'nan';
  return pyFloatRepr(pyRound2(v));
}
