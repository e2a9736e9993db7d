"""hexamer.machine: the machine record that bench tables and eval reports carry."""

from __future__ import annotations

import os

import torch

from hexamer.machine import cpu_name, machine_info


def test_machine_info_names_the_cpu_threads_and_versions() -> None:
    info = machine_info()
    assert info["cpu_count"] == os.cpu_count()
    assert info["torch_threads"] == torch.get_num_threads()
    assert info["torch"] == torch.__version__
    assert info["processor"] == cpu_name() and info["processor"]
    assert "native_cpu_kernels" in info


def test_bench_report_takes_it_from_the_product_module() -> None:
    from hexamer.bench import report

    assert report.machine_info is machine_info
