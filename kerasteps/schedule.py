"""`Every`: the one schedule that decides when every kerasteps callback fires."""

from __future__ import annotations

from typing import Any

from kerasteps._validate import check_bool, check_int, check_that

__all__ = ["Every"]


class Every:
    """Fires every `n` global steps: the schedule shared by all kerasteps callbacks.

    By default it fires at steps `n, 2n, 3n, ...`. With `start=s` it fires at
    `s, s + n, s + 2n, ...`; `start=1` is TF1's `log_every_n` (steps 1, n+1, 2n+1).
    `first=True` also fires on the first step of each `fit()` run, `last=True` on
    the final step of a run.

    Steps can jump (with `steps_per_execution=K` a callback sees the step move by K),
    so the schedule answers one question: did the step cross a firing step when it
    moved from `prev` to `step`? A callback then reports the true step it sees,
    never the scheduled one.

    Args:
        n: Positive int, the period in steps.
        start: Optional int >= 1, the first firing step. Defaults to `n`.
        first: Bool, default False. Also fire on the first step of every run.
        last: Bool, default False. Also fire on the final step of every run.

    Example:

    >>> from kerasteps import Every
    >>> every = Every(100, start=1)
    >>> [s for s in range(1, 302) if every.crossed(s - 1, s)]
    [1, 101, 201, 301]
    >>> Every(3).crossed(4, 8)  # a jump of 4 steps crosses step 6
    True
    """

    def __init__(
        self, n: int, start: int | None = None, first: bool = False, last: bool = False
    ):
        self.n = check_int("n", n)
        self.start = self.n if start is None else check_int("start", start)
        self.first = check_bool("first", first)
        self.last = check_bool("last", last)

    @classmethod
    def coerce(cls, every: int | Every, name: str = "every") -> Every:
        """Returns `every` as an `Every`, accepting a plain positive int.

        Args:
            every: An `Every`, or a positive int `n` meaning `Every(n)`.
            name: Name of the argument, used in the error message.

        Returns:
            An `Every` instance.

        Raises:
            TypeError: if `every` is neither an int nor an `Every`.
            ValueError: if it is an int <= 0.

        Example:

        >>> from kerasteps import Every
        >>> Every.coerce(10)
        Every(10)
        """
        if isinstance(every, Every):
            return every
        what = "a positive int or a kerasteps.Every"
        check_int(name, every, None, kind=what)
        check_that(name, every, every > 0, what, wrong_type=ValueError)
        return cls(int(every))

    def is_scheduled(self, step: int) -> bool:
        """Returns True if `step` is one of the periodic firing steps.

        Args:
            step: A global step.

        Example:

        >>> from kerasteps import Every
        >>> Every(100, start=1).is_scheduled(101)
        True
        """
        return step >= self.start and (step - self.start) % self.n == 0

    def next_after(self, step: int) -> int:
        """Returns the first periodic firing step strictly greater than `step`.

        Args:
            step: A global step.

        Example:

        >>> from kerasteps import Every
        >>> Every(3).next_after(6)
        9
        """
        if step < self.start:
            return self.start
        return self.start + ((step - self.start) // self.n + 1) * self.n

    def crossed(self, prev: int, step: int) -> bool:
        """Returns True if a periodic firing step lies in `(prev, step]`.

        Args:
            prev: The global step before the update(s).
            step: The global step after them.

        Example:

        >>> from kerasteps import Every
        >>> Every(3).crossed(2, 3), Every(3).crossed(3, 5)
        (True, False)
        """
        return step > prev and self.next_after(prev) <= step

    def fires(self, prev: int, step: int, run_start: int | None = None) -> bool:
        """Returns True if a callback should act after moving from `prev` to `step`.

        This is `crossed(prev, step)`, plus the first execution of a run when
        `first=True` (`prev == run_start`). The final step (`last=True`) is only
        known when the run ends; callbacks ask `last` then.

        Args:
            prev: The global step before the update(s).
            step: The global step after them.
            run_start: The global step at which the current run began.

        Example:

        >>> from kerasteps import Every
        >>> Every(100, first=True).fires(40, 41, run_start=40)
        True
        """
        first_of_run = self.first and run_start is not None and prev == run_start
        return step > prev and (first_of_run or self.crossed(prev, step))

    def __repr__(self) -> str:
        parts = [str(self.n)]
        if self.start != self.n:
            parts.append(f"start={self.start}")
        parts += [f"{flag}=True" for flag in ("first", "last") if getattr(self, flag)]
        return f"Every({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Every):
            return NotImplemented
        return self.get_config() == other.get_config()

    def __hash__(self) -> int:
        return hash(tuple(self.get_config().values()))

    def get_config(self) -> dict[str, Any]:
        """Returns the constructor arguments, for saving callback configuration.

        Example:

        >>> from kerasteps import Every
        >>> Every(5, start=1).get_config()
        {'n': 5, 'start': 1, 'first': False, 'last': False}
        """
        return {
            "n": self.n,
            "start": self.start,
            "first": self.first,
            "last": self.last,
        }
