"""SM clock and board power while a kernel runs, read from NVML (the driver's ``libnvidia-ml``).

Why a benchmark wants them: an H100 running FP8 GEMMs back to back sits at its power limit, so
its SM clock drops to whatever the kernel's energy per cycle allows. TFLOP/s is then clock x work
per cycle, and two kernels can differ in either. ``flop_per_sm_cycle`` separates the two, so an
engineer knows whether to cut cycles (scheduling) or energy (instructions, data movement).

NVML ships with the driver, so this needs no package; on a machine without a driver
:func:`open_sensors` returns ``None`` and callers leave the columns empty.
"""

from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass, field

NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0
NVML_SUCCESS = 0
NVML_FI_DEV_POWER_INSTANT = 186  # nvmlDeviceGetPowerUsage averages over ~1 s: too slow for one kernel
# nvmlClocksEventReasons bits worth telling a kernel engineer about (idle/app-clock bits left out)
CLOCK_LIMITERS = {0x4: "power cap", 0x8: "hw slowdown", 0x20: "sw thermal", 0x40: "hw thermal", 0x80: "power brake"}


class _Value(ctypes.Union):
    _fields_ = [
        ("d", ctypes.c_double),
        ("ui", ctypes.c_uint),
        ("ul", ctypes.c_ulong),
        ("ull", ctypes.c_ulonglong),
        ("sll", ctypes.c_longlong),
        ("si", ctypes.c_int),
    ]


class _FieldValue(ctypes.Structure):
    _fields_ = [
        ("fieldId", ctypes.c_uint),
        ("scopeId", ctypes.c_uint),
        ("timestamp", ctypes.c_longlong),
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", _Value),
    ]


class GpuSensors:
    """One GPU's NVML handle; :meth:`read` is cheap enough to poll while launches drain."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p):
        self._lib = lib
        self._handle = handle
        # renamed in driver 535; older drivers have only the throttle-reasons name
        self._reasons_fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )

    def read(self) -> tuple[float, float, int]:
        """(SM clock in MHz, instantaneous board power in W, clock-event reason bits); NaN / 0 for
        a reading the driver refuses."""
        mhz = ctypes.c_uint(0)
        ok_clk = self._lib.nvmlDeviceGetClockInfo(self._handle, NVML_CLOCK_SM, ctypes.byref(mhz)) == NVML_SUCCESS
        fv = _FieldValue(fieldId=NVML_FI_DEV_POWER_INSTANT)
        ok_pw = (
            self._lib.nvmlDeviceGetFieldValues(self._handle, 1, ctypes.byref(fv)) == NVML_SUCCESS
            and fv.nvmlReturn == NVML_SUCCESS
        )
        reasons = ctypes.c_ulonglong(0)
        if self._reasons_fn is None or self._reasons_fn(self._handle, ctypes.byref(reasons)) != NVML_SUCCESS:
            reasons.value = 0
        return (
            float(mhz.value) if ok_clk else float("nan"),
            fv.value.ui / 1000.0 if ok_pw else float("nan"),
            int(reasons.value),
        )

    def temperature(self) -> float | None:
        """GPU die temperature in °C (None where refused): a warmer board leaks more of the same power
        limit, so a power-capped build runs a lower clock late in a long run than early."""
        deg = ctypes.c_uint(0)
        ok = self._lib.nvmlDeviceGetTemperature(self._handle, NVML_TEMPERATURE_GPU, ctypes.byref(deg)) == NVML_SUCCESS
        return float(deg.value) if ok else None

    def limits(self) -> dict:
        """The top SM clock (MHz) and the enforced board power limit (W); None where refused."""
        mhz, mw = ctypes.c_uint(0), ctypes.c_uint(0)
        ok_clk = self._lib.nvmlDeviceGetMaxClockInfo(self._handle, NVML_CLOCK_SM, ctypes.byref(mhz)) == NVML_SUCCESS
        ok_pw = self._lib.nvmlDeviceGetEnforcedPowerLimit(self._handle, ctypes.byref(mw)) == NVML_SUCCESS
        return {"max_mhz": float(mhz.value) if ok_clk else None, "power_limit_w": mw.value / 1000.0 if ok_pw else None}


def open_sensors(pci_bus_id: str | None) -> GpuSensors | None:
    """NVML handle of the GPU at ``pci_bus_id`` ("0000:1b:00.0"; matching by bus id keeps
    CUDA_VISIBLE_DEVICES from making us read another GPU), or of the only GPU when no id is given;
    ``None`` without NVML or when the GPU cannot be told apart."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if lib.nvmlInit_v2() != NVML_SUCCESS:
        return None
    handle = ctypes.c_void_p()
    if pci_bus_id:
        ok = lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(handle)) == NVML_SUCCESS
    else:
        count = ctypes.c_uint(0)
        ok = (
            lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == NVML_SUCCESS
            and count.value == 1
            and lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == NVML_SUCCESS
        )
    return GpuSensors(lib, handle) if ok else None


def torch_device_sensors(device: int = 0) -> GpuSensors | None:
    """:func:`open_sensors` for a torch CUDA device."""
    import torch

    props = torch.cuda.get_device_properties(device)
    bus = getattr(props, "pci_bus_id", None)
    bus_id = (
        f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        if isinstance(bus, int)
        else None
    )
    return open_sensors(bus_id) or (open_sensors(None) if bus_id else None)


@dataclass
class SensorLog:
    """Readings taken while the timed launches ran; :meth:`summary` is what a bench row keeps."""

    sensors: GpuSensors
    mhz: list[float] = field(default_factory=list)
    watts: list[float] = field(default_factory=list)
    reasons: int = 0

    def poll(self) -> None:
        mhz, watts, reasons = self.sensors.read()
        self.mhz.append(mhz)
        self.watts.append(watts)
        self.reasons |= reasons

    def summary(self) -> dict:
        """Median SM MHz and W over the readings, and what held the clock down at any of them."""
        mhz = [x for x in self.mhz if x == x]
        watts = [x for x in self.watts if x == x]
        limiters = [name for bit, name in CLOCK_LIMITERS.items() if self.reasons & bit]
        return dict(
            sm_mhz=statistics.median(mhz) if mhz else None,
            watts=statistics.median(watts) if watts else None,
            samples=len(self.mhz),
            clock_limiters=limiters,
        )


def flop_per_sm_cycle(flops: float, ms: float, sm_mhz: float | None, num_sms: int) -> float | None:
    """Work per SM per clock cycle: TFLOP/s with the clock divided out (H100 FP8 dense peak: 8,192)."""
    if not sm_mhz or not num_sms or ms <= 0:
        return None
    return flops / (ms * 1e-3) / (sm_mhz * 1e6) / num_sms
