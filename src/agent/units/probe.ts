import { execFile } from 'node:child_process';
import http from 'node:http';
import { parseDuration, type UnitProbe } from '../../domain';

/*
 * A unit's probe: does its process answer? Liveness only. Its outcome is the value's `answers`,
 * never evidence that the process took its content (that is `started_after`, from the manager),
 * so a probe can keep a unit from converging and never make it converge by itself.
 *
 * The host lists each probe in agent.yaml (allow.probes) before one runs: an http probe is a GET
 * to this host's loopback, by address, never following a redirect; a command runs without a
 * shell, in /, with an environment of PATH and LANG only (none of the agent's credentials), its
 * output capped.
 */

export const PROBE_TIMEOUT_MS = 2000;
/** What a probe's answer is read up to: enough for a health line, not a download. */
const ANSWER_CAP = 64 * 1024;

export interface ProbeOutcome {
  answers: boolean;
  /** One human sentence: what was asked and what came back. */
  said: string;
}

export async function runProbe(probe: UnitProbe): Promise<ProbeOutcome> {
  const timeoutMs = (probe.timeout === undefined ? null : parseDuration(probe.timeout)) ?? PROBE_TIMEOUT_MS;
  return 'http' in probe ? await httpProbe(probe.http, timeoutMs) : await commandProbe(probe.command, probe.output, timeoutMs);
}

const excerpt = (text: string) => JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);

function httpProbe(ask: { url: string; status?: number; body?: string }, timeoutMs: number): Promise<ProbeOutcome> {
  const want = ask.status ?? 200;
  return new Promise((resolve) => {
    const req = http.get(ask.url, { agent: false, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (size < ANSWER_CAP) chunks.push(chunk);
        size += chunk.length;
      });
      res.on('error', (err) => resolve({ answers: false, said: `GET ${ask.url}: ${err.message}` }));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const body = Buffer.concat(chunks).toString('utf8').slice(0, ANSWER_CAP);
        const head = `GET ${ask.url} answered HTTP ${status}`;
        if (status !== want) return resolve({ answers: false, said: `${head}, not ${want}` });
        if (ask.body !== undefined && !body.includes(ask.body))
          return resolve({ answers: false, said: `${head} with a body without ${excerpt(ask.body)}: ${excerpt(body)}` });
        resolve({ answers: true, said: ask.body === undefined ? head : `${head} with ${excerpt(ask.body)} in its body` });
      });
    });
    req.on('error', (err) =>
      resolve({
        answers: false,
        said: `GET ${ask.url}: ${err.name === 'AbortError' || err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : err.message}`,
      }),
    );
  });
}

function commandProbe(argv: string[], output: string | undefined, timeoutMs: number): Promise<ProbeOutcome> {
  const shown = argv.join(' ');
  return new Promise((resolve) => {
    execFile(
      argv[0],
      argv.slice(1),
      {
        cwd: '/',
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
        timeout: timeoutMs,
        maxBuffer: ANSWER_CAP,
        encoding: 'utf8',
      },
      (err, stdout) => {
        if (err?.killed) return resolve({ answers: false, said: `${shown}: no answer within ${timeoutMs} ms` });
        const code: unknown = err?.code;
        if (err) return resolve({ answers: false, said: `${shown}: ${typeof code === 'number' ? `exit ${code}` : err.message}` });
        if (output !== undefined && !stdout.includes(output))
          return resolve({ answers: false, said: `${shown} printed ${excerpt(stdout.trim())}, without ${excerpt(output)}` });
        resolve({ answers: true, said: `${shown} exited 0${output === undefined ? '' : ` printing ${excerpt(output)}`}` });
      },
    );
  });
}
