// The user documentation (README.md and docs/*.md): every relative link points to a file that
// exists, every #anchor to a heading of its target (GitHub's heading ids), and no page holds a
// machine path. Headings and links inside code blocks are ignored.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import t from 'tap';

const root = process.cwd();
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The page's lines outside fenced code blocks. */
function prose(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) out.push(line);
  }
  return out;
}

/** GitHub's id of a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingIds(text: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    ids.add(n === 0 ? base : `${base}-${n}`);
  }
  return ids;
}

/** Link targets of a page's prose: `[text](target)` and `![alt](target)`, inline code removed. */
function links(text: string): string[] {
  const out: string[] = [];
  for (const line of prose(text)) {
    const plain = line.replace(/`[^`]*`/g, '');
    for (const m of plain.matchAll(/\]\(([^()\s]+)\)/g)) out.push(m[1]);
  }
  return out;
}

t.test('every relative link and anchor of the documentation resolves', async (t) => {
  t.ok(pages.length > 5, `${pages.length} pages`);
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const target of links(text)) {
      if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? page : normalize(join(dirname(page), path));
      const abs = join(root, file);
      t.ok(existsSync(abs), `${page}: ${target} → ${file} exists`);
      if (anchor === undefined || !existsSync(abs) || statSync(abs).isDirectory()) continue;
      if (!file.endsWith('.md')) continue;
      t.ok(headingIds(readFileSync(abs, 'utf8')).has(anchor), `${page}: #${anchor} is a heading of ${file}`);
    }
  }
});

t.test('no machine paths in the documentation', async (t) => {
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    t.notOk(/\/(work|home|root|tmp)\//.test(text), `${page} names no machine path`);
  }
});

t.test('the heading ids follow GitHub', async (t) => {
  const ids = headingIds(
    '# Sink attention — semantics\n## Policy (`lib/model/policy.ts`)\n## A\n## A\n```\n# not a heading\n```\n',
  );
  t.same([...ids], ['sink-attention--semantics', 'policy-libmodelpolicyts', 'a', 'a-1']);
});
