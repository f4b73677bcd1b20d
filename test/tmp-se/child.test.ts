import { spawn } from 'node:child_process';
import t from 'tap';
t.test('child', async (t) => {
  const t0 = Date.now();
  const child = spawn(process.execPath, [...process.execArgv, 'lib/cli/main.ts', 'serve', '--checkpoint', process.env.CK as string, '--port', '0', '--quiet'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => { buf += d; if (buf.includes('\n')) resolve(buf); });
    child.stderr.on('data', (d) => console.error(String(d)));
    child.on('exit', (c) => reject(new Error('exit ' + c)));
  });
  console.log('started in', (Date.now() - t0) / 1000, line);
  child.kill('SIGKILL');
  t.pass();
});
