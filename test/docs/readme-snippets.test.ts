// The README's ```ts code blocks, each type-checked on its own as a module with the project's
// compiler options, its imports of 'sinkflex-rl' and 'sinkflex-rl/<layer>' mapped to the
// sources (lib/index.ts, lib/<layer>/index.ts): a snippet that uses a name it never defines or
// imports, or calls an API with the wrong arguments, fails here. The snippets are never run.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import t from 'tap';
import ts from 'typescript';

const root = process.cwd();
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The ```ts blocks of a Markdown page, with the line each starts on. */
function tsBlocks(text: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!/^```ts\s*$/.test(lines[i])) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++;
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

const blocks = tsBlocks(readme);

t.test('the README has ts snippets, each a module that imports the package', async (t) => {
  t.ok(blocks.length >= 5, `${blocks.length} snippets`);
  for (const b of blocks)
    t.match(b.code, /from 'sinkflex-rl(\/[a-z]+)?'/, `the snippet at README.md:${b.line} imports the package`);
});

t.test('every README ts snippet type-checks on its own', async (t) => {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => t.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    },
  );
  if (config === undefined) throw new Error('tsconfig.json could not be read');
  const options: ts.CompilerOptions = {
    ...config.options,
    noEmit: true,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
    baseUrl: root,
    paths: { 'sinkflex-rl': ['lib/index.ts'], 'sinkflex-rl/*': ['lib/*/index.ts'] },
  };
  // in-memory files beside the tests (so that package.json's "type": "module" applies)
  const files = new Map(blocks.map((b, i) => [join(root, 'test', 'docs', `readme-snippet-${i + 1}.ts`), b]));
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  host.readFile = (f) => files.get(f)?.code ?? readFile.call(host, f);
  host.getSourceFile = (f, language, onError, create) => {
    const b = files.get(f);
    return b !== undefined
      ? ts.createSourceFile(f, b.code, language, true)
      : getSourceFile.call(host, f, language, onError, create);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  for (const [name, b] of files) {
    const source = program.getSourceFile(name);
    if (source === undefined) throw new Error(`${name} was not compiled`);
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    const messages = diagnostics.map((d) => {
      const at = d.start !== undefined ? source.getLineAndCharacterOfPosition(d.start).line : 0;
      return `README.md:${b.line + at}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    t.same(messages, [], `the snippet at README.md:${b.line} type-checks`);
  }
});
