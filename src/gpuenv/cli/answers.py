"""Commands that answer a researcher's questions from records: claims (published speed claims beside
what was measured) and decide (the course's decision table, computed). Each parses, calls the library
(gpuenv.claims, gpuenv.decide) and prints."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from gpuenv.cli.common import app, console, print_skipped
from gpuenv.escape import markup, terminal


@app.command()
def claims(
    paths: Annotated[list[str] | None, typer.Argument(help="record files or directories (default: results/)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Every published claim in claims/register.toml beside its closest measured case, or the run it needs."""
    from gpuenv import claims as cl
    from gpuenv.history.load import load_records

    records, problems = load_records(paths or ["results"], "records")
    print_skipped(problems)
    results = cl.check_all(records)
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return
    for line in cl.text_report(results, cl.register_path()):
        console.print(terminal(line), highlight=False, markup=False, soft_wrap=True)


@app.command()
def decide(
    budget: Annotated[str, typer.Option("--budget", help="env steps per run: 50M, 1B, 2e7 ...")],
    task: Annotated[list[str] | None, typer.Option("--task", "-t", help="the task (gpuenv list tasks; repeatable); default: every task the records measured, one answer line each")] = None,
    paths: Annotated[list[str] | None, typer.Argument(help="record files or directories (default: results/)")] = None,
    configs: Annotated[int, typer.Option("--configs", help="runs (hyperparameter configs), one after another")] = 1,
    results: Annotated[list[str] | None, typer.Option("--results", hidden=True,
                                                       help="the old spelling of the paths: record files or directories")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the decision as JSON (one object; a list of them without --task or with several) instead of the table")] = False,
    partial: Annotated[bool, typer.Option("--partial", help="take in half-finished runs (interrupted, or killed before all their cases), which are otherwise left out, or refused where nothing finished remains")] = False,
    machine: Annotated[str | None, typer.Option("--machine", "-m", help="answer from this machine's records: its number (as `gpuenv show` numbers them) or text in its label; default: the one with the newest records")] = None,
) -> None:
    """The course's decision table, answered from measured records: wall-clock to the budget per backend, the row, the framework."""
    from gpuenv.decide import Decision, parse_steps
    from gpuenv.decide import decide as run_decide
    from gpuenv.format import duration
    from gpuenv.history.load import load_records
    from gpuenv.tasks import get_task

    for name in task or []:
        get_task(name)  # an unknown task: one line naming the known ones
    steps = parse_steps(budget)
    records, problems = load_records([*(paths or []), *(results or [])] or ["results"], "records")
    print_skipped(problems)
    if task is None or len(task) > 1:  # several tasks: one answer line each (`make bench` ends with these)
        from gpuenv.decide import decide_each

        answers = decide_each(task, steps, configs, records, machine, partial)
        if json_out:
            import json

            print(json.dumps([a.to_dict() if isinstance(a, Decision) else {"task": name, "error": a} for name, a in answers], indent=1))
            return
        console.print(f"[bold]decision[/] for {configs} x {steps:,} env steps per task (gpuenv decide --task T --budget {budget} "
                      "for the table and the reasons):", highlight=False)
        for name, answer in answers:
            line = f"{answer.row} -> {answer.answer}" if isinstance(answer, Decision) else f"no answer: {answer}"
            console.print(f"  {terminal(name)}: {terminal(line)}", highlight=False, markup=False)
        return
    (task_name,) = task
    d = run_decide(task_name, steps, configs, records, machine, partial)
    if json_out:
        import json

        print(json.dumps(d.to_dict(), indent=1))
        return
    t = Table(title=f"{task_name}: {configs} x {steps:,} env steps, from records of {markup(d.machine)}", title_justify="left")
    for col in ("backend", "envs", "env steps/s", "startup+compile s", "stepping to budget", "PPO training, predicted [interval]"):
        t.add_column(col)
    for o in d.options:
        p = o.predicted_s(steps, configs)
        ppo = f"{duration(p[0])} [{duration(p[1])}-{duration(p[2])}] at {o.training.num_envs} envs" if p and o.training else "-"
        t.add_row(o.selector, str(o.num_envs), f"{o.rate:,.0f} ({o.ci[0]:,.0f}-{o.ci[1]:,.0f})", f"{o.fixed_s:.1f}",
                  duration(o.wall_s(steps, configs)), ppo)
    console.print(t)
    trainers = sorted({o.training.trainer for o in d.options if o.training})
    if trainers:
        console.print(f"[dim]PPO training = startup+compile + steps / training rate: the shared SB3 PPO's composed from its collect "
                      f"(or +inference) and learn phases (1/rate = 1/collection + 1/learning), a native trainer's measured end to "
                      f"end; trainers: {markup('; '.join(trainers))}[/]", highlight=False)
    for c in d.checks:
        console.print(f"model check: {markup(c.text)}", highlight=False)
    console.print(f"[bold]row[/]: {markup(d.row)}", highlight=False)
    console.print(f"[bold]answer[/]: {markup(d.answer)}", highlight=False)
    for w in d.why:
        console.print(f"  why: {terminal(w)}", highlight=False, markup=False)
    for n in d.needs_gpu:
        console.print(f"  needs GPU measurements: {terminal(n)}", highlight=False, markup=False)
    for v in d.versus:
        console.print(f"  course vs numbers: {terminal(v)}", highlight=False, markup=False)
    for other in d.other_machines:
        console.print(f"  also in these records (gpuenv decide ... --machine N): {terminal(other)}", highlight=False, markup=False)
