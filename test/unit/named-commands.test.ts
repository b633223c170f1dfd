import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program';

/*
 * Every text Datum writes for a person that names a `datum` command (a condition's detail, a
 * refusal's or a work item's fix, an error's "— fix:", a reason's gloss) names one the command
 * tree has, with options that command takes. The texts are the string and template literals of
 * src/ (comments are not read: they speak to developers), parsed with the TypeScript compiler; the
 * tree is the commander program `datum` itself runs (src/cli/program.ts).
 */

const SRC = path.resolve(__dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const full = path.join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(full);
    return d.name.endsWith('.ts') && !d.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** Each literal's text as a person reads it; a `${…}` substitution reads as the placeholder X. */
const X = 'X';
function literalTexts(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const texts: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) texts.push(node.text);
    else if (ts.isTemplateExpression(node))
      texts.push(node.head.text + node.templateSpans.map((s) => `${X}${s.literal.text}`).join(''));
    ts.forEachChild(node, visit);
  };
  visit(source);
  return texts;
}

/**
 * "datum" as a command a person types: not part of a path (.datum/, datum-agent, /datum) or a
 * name. The phrase runs to the end of the clause: a comma, semicolon, parenthesis, colon, quote or
 * backtick, or a sentence's end.
 */
const MENTION = /(?<![\w./@-])datum((?: +[^\s,;:()'"`]+)+)/g;

interface Mention {
  file: string;
  phrase: string;
}

function mentions(): Mention[] {
  return sourceFiles(SRC).flatMap((file) =>
    literalTexts(file).flatMap((text) =>
      [...text.matchAll(MENTION)].map((m) => ({ file: path.relative(SRC, file), phrase: `datum${m[1]}`.replace(/\.$/, '') })),
    ),
  );
}

const named = (cmd: CommandUnknownOpts, word: string): CommandUnknownOpts | undefined =>
  cmd.commands.find((c) => c.name() === word || c.aliases().includes(word));

/** What is wrong with the phrase against the tree, or null when every command and option it names exists. */
function wrongIn(phrase: string, program: CommandUnknownOpts): string | null {
  const words = phrase.split(/ +/).slice(1);
  // `datum ${…}`, `datum <command>`, `complete -c datum -f`: no command is named.
  if (!/^[a-z][a-z-]*$/.test(words[0])) return null;
  let cmd = named(program, words[0]);
  if (!cmd) return `"datum ${words[0]}" is no command`;
  for (const [i, word] of words.slice(1).entries()) {
    const sub = named(cmd, word);
    if (sub) cmd = sub;
    else if (/^-/.test(word)) {
      const why = optionWrong(cmd, word.replace(/[=.].*$/, ''), words[i + 2]);
      if (why) return why;
    } else if (cmd.commands.length > 0 && !hasAction(cmd) && /^[a-z][a-z-]*$/.test(word)) {
      // A group (no action of its own) takes a subcommand next, not an argument.
      return `"${cmd.name()} ${word}" is no subcommand`;
    }
  }
  return null;
}

/** The flag is one the command takes; a value spelled as choices (retake|yield) is among its choices. */
function optionWrong(cmd: CommandUnknownOpts, flag: string, value: string | undefined): string | null {
  if (flag === '--help' || flag === '-h') return null;
  const option = cmd.options.find((o) => o.long === flag || o.short === flag);
  if (!option) return `"${cmd.name()}" takes no ${flag}`;
  // Choices commander enforces, or those the flag spells (--resolution <retake|yield>).
  const choices = option.argChoices ?? /<([a-z-]+(?:\|[a-z-]+)+)>/.exec(option.flags)?.[1].split('|');
  if (!choices || value === undefined || !/^[a-z-]+(\|[a-z-]+)*$/.test(value)) return null;
  const unknown = value.split('|').filter((v) => !choices.includes(v));
  return unknown.length > 0
    ? `"${cmd.name()} ${flag}" has no choice ${unknown.join(', ')} (it takes ${choices.join(', ')})`
    : null;
}

const hasAction = (cmd: CommandUnknownOpts) => (cmd as unknown as { _actionHandler: unknown })._actionHandler != null;

describe('commands named in what Datum says', () => {
  const found = mentions();

  it('finds the texts it checks (the reset-fence procedure among them)', () => {
    expect(found.length).toBeGreaterThan(20);
    expect(
      found.some((m) => m.file === 'agent/activities/write-checks.ts' && m.phrase.startsWith('datum agent reset-fence --node')),
    ).toBe(true);
  });

  it('every datum command and option named in src/ exists in the command tree', () => {
    const program = buildProgram();
    const wrong = found.flatMap((m) => {
      const why = wrongIn(m.phrase, program);
      return why ? [`${m.file}: "${m.phrase}": ${why}`] : [];
    });
    expect(wrong).toEqual([]);
  });

  it('the checker refuses a mistyped command, subcommand or option', () => {
    const program = buildProgram();
    expect(wrongIn('datum reset-fence --to 10', program)).toMatch(/no command/);
    expect(wrongIn('datum work shw ITEM', program)).toMatch(/no subcommand/);
    expect(wrongIn('datum agent reset-fence --generation 10', program)).toMatch(/takes no --generation/);
    expect(wrongIn('datum resolve N-24 --resource app --resolution retake|ignore', program)).toMatch(/no choice ignore/);
    expect(wrongIn('datum agent reset-fence --node N-24 --to 10 --by WHO --reason WHY', program)).toBeNull();
  });
});
