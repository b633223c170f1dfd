// Activities for the toolchain smoke test: just enough to prove a worker runs an activity.

export function greet(name: string): Promise<string> {
  return Promise.resolve(`hello, ${name}`);
}
