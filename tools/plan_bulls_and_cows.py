"""Search the `eig_lookahead` plan for bulls and cows and write it into the package.

The search (`sounding.inquiry.domains.bulls_and_cows_plan`) tries the `--width` best distinct
guesses by each of its rankings at every position; wider is better and slower. The shipped plan
was searched with the defaults.
"""

from __future__ import annotations

import argparse
import time

from sounding.inquiry.domains import bulls_and_cows_plan as planning
from sounding.inquiry.domains.bulls_and_cows import SOLVED, feedback_table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--width", type=int, default=4, help="guesses tried per ranking at each position")
    parser.add_argument("--out", default=str(planning.SHIPPED), help="where to write the plan")
    options = parser.parse_args()
    started = time.monotonic()
    table = feedback_table()
    plan = planning.Search(table.table, SOLVED, options.width).plan()
    with open(options.out, "w") as out:
        out.write(planning.write(plan, table.strings))
    total = plan[()].total
    print(
        f"{len(plan)} positions, {total} guesses over {len(table.strings)} secrets "
        f"(mean {total / len(table.strings):.4f}), {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
