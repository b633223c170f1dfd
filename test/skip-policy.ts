/**
 * Which skipped tests a CI run may have (issue 35, must-show 3). In CI (scripts/ci.cjs) the run
 * fails on every skipped test that is not listed here, and prints it with its note: a test that
 * needs a program installs it (test/helpers/tools.ts) or fails, so a skip there is missing
 * coverage. Outside CI every skip is allowed and the closing report lists it with its reason.
 *
 * A skip is listed by its file, its full name ("describe > test") and its note: the same test
 * skipping for another reason is not allowed. Each entry says why that skip may stand.
 */
export interface AllowedSkip {
  /** The test file, from the repository root. */
  file: string;
  /** The test's full name, as vitest joins it: the describe blocks and the title, separated by " > ". */
  test: RegExp;
  /** What its ctx.skip note must say. */
  note: RegExp;
  why: string;
}

export const ALLOWED_SKIPS: readonly AllowedSkip[] = [
  {
    // The agent reads /proc/1/comm and /run/systemd/system; no test can make a booted host look unbooted.
    file: 'test/agent/service-systemd.test.ts',
    test: /^on a host without systemd > /,
    note: /^this host runs systemd \(PID 1 is \S+\)$/,
    why:
      'what the agent says about services.backend: systemd on a host without systemd can only be seen on such a host; ' +
      'on one booted with systemd the same backend is tested against that manager instead',
  },
  {
    // `datum agent` with no --config reads this path; the test stops before it would start an agent.
    file: 'test/cli/offline.test.ts',
    test: /^datum validate > reads seed 001's agent\.yaml .* datum agent defaults to \/etc\/datum\/agent\.yaml$/,
    note: /^this machine has an \/etc\/datum\/agent\.yaml: an agent would start$/,
    why:
      "on a machine with a real /etc/datum/agent.yaml, `datum agent` without --config would start serving that machine's node; " +
      'the first half of the test (the seed file) has run and passed by then',
  },
];

export interface Skipped {
  file: string;
  test: string;
  note: string | undefined;
}

/** The skips `ALLOWED_SKIPS` allows, each with the reason it may stand, and those it does not. */
export function judgeSkips(skipped: readonly Skipped[]): { allowed: (Skipped & { why: string })[]; unlisted: Skipped[] } {
  const allowed: (Skipped & { why: string })[] = [];
  const unlisted: Skipped[] = [];
  for (const skip of skipped) {
    const entry = ALLOWED_SKIPS.find((a) => a.file === skip.file && a.test.test(skip.test) && a.note.test(skip.note ?? ''));
    if (entry) allowed.push({ ...skip, why: entry.why });
    else unlisted.push(skip);
  }
  return { allowed, unlisted };
}
