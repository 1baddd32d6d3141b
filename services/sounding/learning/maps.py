"""The miss-rate and confidence maps of LearningService (`learning.service`, which inherits
them): each fitted by Calibrate from the logged outcomes, versioned and persisted, and put in
force (the confidence map only if it validates: `learning.calibration`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable

from sounding.core.calibration import ConfidenceCalibration, MissRateCalibration
from sounding.learning import calibration
from sounding.learning.protocol import CalibrationProgress, CalibrationReport
from sounding.learning.remembered import RememberedRetrievals
from sounding.runtime import errors
from sounding.store.learning import LearningLog, ObservationRecord, RetrievalRecord


class CalibratedMaps:
    _log: LearningLog
    _lock: asyncio.Lock
    remembered: RememberedRetrievals
    miss_rate_calibration: MissRateCalibration | None
    confidence_calibration: ConfidenceCalibration | None
    _logged: Callable[[], Awaitable[list[tuple[ObservationRecord, RetrievalRecord]]]]

    async def _load_calibrations(self) -> None:
        latest = await self._log.latest_calibration("miss_rate")
        if latest is not None:
            self.miss_rate_calibration = MissRateCalibration.from_params(*latest)
        latest = await self._log.latest_calibration("confidence")
        if latest is not None:
            self.confidence_calibration = ConfidenceCalibration.from_params(*latest)

    async def calibrate_miss_rate(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """Fit the stated miss rate (and recall) to the observed outcomes, version it, persist it,
        and report miss rate and recall as measured from then on. FailedPrecondition with fewer
        than MIN_OUTCOMES usable outcomes."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.remembered.wait_written()
            outcomes = [
                calibration.outcome(r.stated_miss_rate, o.outcome)
                for o, r in await self._logged()
                if r.stated_miss_rate is not None
            ]
            if len(outcomes) < calibration.MIN_OUTCOMES:
                raise _too_few("MISS_RATE", "that stated a miss rate", len(outcomes))
            yield CalibrationProgress("fitting", 0.4)
            version = (self.miss_rate_calibration.version if self.miss_rate_calibration else 0) + 1
            fitted, diagnostics, curves = await asyncio.to_thread(calibration.fit, outcomes, version)
            await self._log.append_calibration("miss_rate", version, fitted.params(), diagnostics)
            self.miss_rate_calibration = fitted
            summary = (
                f"miss-rate map v{version} from {len(outcomes)} outcomes: ECE "
                f"{diagnostics['miss_rate_ece_before']:.3f} -> {diagnostics['miss_rate_ece_after']:.3f} "
                "(on the outcomes fitted)"
            )
            yield CalibrationReport("miss_rate", version, len(outcomes), True, summary, diagnostics, curves)

    async def calibrate_confidence(self) -> AsyncGenerator[CalibrationProgress | CalibrationReport, None]:
        """Fit the stated conservative confidence to whether the agent succeeded; if the map
        validates, version it, persist it, and state the confidence as measured from then on
        (learning.calibration: the validation). FailedPrecondition with
        fewer than MIN_OUTCOMES observed retrievals that stated one and report agent_success."""
        async with self._lock:
            yield CalibrationProgress("reading the observation log", 0.0)
            await self.remembered.wait_written()
            outcomes = [
                (r.stated_confidence, bool(o.outcome["agent_success"]))
                for o, r in await self._logged()
                if r.stated_confidence is not None and o.outcome["agent_success"] is not None
            ]
            if len(outcomes) < calibration.MIN_OUTCOMES:
                raise _too_few(
                    "CONFIDENCE", "that stated a confidence and report agent_success", len(outcomes)
                )
            yield CalibrationProgress("fitting and validating", 0.4)
            incumbent = self.confidence_calibration.version if self.confidence_calibration else 0
            fit = await asyncio.to_thread(calibration.fit_confidence, outcomes, incumbent + 1)
            d = fit.diagnostics
            figures = (
                f"ECE {d['confidence_ece_before']:.3f} stated, {d['confidence_ece_cross_validated']:.3f} "
                f"mapped by fits on the other folds, {d['confidence_ece_after']:.3f} on the outcomes fitted"
            )
            if fit.deploy:
                await self._log.append_calibration("confidence", incumbent + 1, fit.calibration.params(), d)
                self.confidence_calibration = fit.calibration
                summary = f"deployed confidence map v{incumbent + 1} from {len(outcomes)} outcomes: {figures}"
            else:
                kept = f"confidence map v{incumbent}" if incumbent else "the confidence as stated"
                summary = (
                    f"kept {kept}: the map fitted to {len(outcomes)} outcomes does not validate ({figures})"
                )
            version = incumbent + 1 if fit.deploy else incumbent
            yield CalibrationReport("confidence", version, len(outcomes), fit.deploy, summary, d, fit.curves)


def _too_few(target: str, which: str, recorded: int) -> errors.FailedPrecondition:
    return errors.FailedPrecondition(
        f"Calibrate({target}) needs at least {calibration.MIN_OUTCOMES} observed retrievals {which}; "
        f"{recorded} are recorded",
        reason="TOO_FEW_OUTCOMES",
    )
