"""The cost-savings report: per trace, what each policy costs against a baseline and why.

:func:`report` reads the warehouse views (``sql/reports``) and writes ``report.html`` (Altair
charts with their JavaScript inlined, works offline), ``charts/*.png`` and ``summary.md``.
"""

from pipeline.report.stage import report

__all__ = ["report"]
