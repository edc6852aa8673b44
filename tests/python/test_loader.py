"""pinfeed's Python module over the C++ loader: ImageFolder parity with torchvision, the CLI's
pixels and checksum lines, resume, views that outlive their loader, Ctrl-C, errors."""

import gc
import os
import pathlib
import resource
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pinfeed


def small_function_source(n=40, shape=(4, 5, 3)):
    def sample(i):
        rng = np.random.default_rng(i)
        return {"image": rng.integers(0, 256, size=shape, dtype=np.uint8), "label": i % 7}
    return pinfeed.from_function(n, [("image", "u8", list(shape)), ("label", "i64", [])], sample)


def test_imagefolder_classes_and_labels_are_torchvisions(photo_folder):
    import torchvision

    want = torchvision.datasets.ImageFolder(str(photo_folder))
    src = pinfeed.image_folder(str(photo_folder), "center_crop(224)")
    assert src.classes == want.classes
    assert {c: i for i, c in enumerate(src.classes)} == want.class_to_idx
    assert len(src) == len(want.samples) == 30
    loader = pinfeed.Loader(src, 8, workers=2, device="cpu")
    seen = {}
    for b in loader:
        labels = np.from_dlpack(b["label"])
        for index, label in zip(b.indices, labels.tolist()):
            seen[index] = label
    assert sorted(seen) == list(range(30))
    assert [seen[i] for i in range(30)] == [t for _, t in want.samples]


def test_pixels_and_checksum_lines_equal_the_cli(photo_folder, pinfeed_cli, tmp_path):
    # The same seed, pipeline and batch size from C++ (`pinfeed run`) and from Python: the same
    # checksum lines and, field by field, the bytes --save-batches wrote.
    out = tmp_path / "batches"
    run = subprocess.run([pinfeed_cli, "run", "--source", "folder:%s" % photo_folder, "--transforms", "center_crop(224)",
                          "-b", "8", "-w", "2", "--seed", "5", "--shuffle", "--device", "cpu", "--checksums",
                          "--save-batches", str(out)], capture_output=True, text=True, check=True)
    cli_lines = [line for line in run.stdout.splitlines() if line.startswith("batch ")]
    assert len(cli_lines) == 4
    loader = pinfeed.Loader(pinfeed.image_folder(str(photo_folder), "center_crop(224)"), 8, workers=1, seed=5, shuffle=True,
                            device="cpu")
    lines = []
    for b in loader:
        lines.append(b.checksum_line())
        for name in ("image", "label"):
            saved = np.load(out / ("%06d.%s.npy" % (b.index, name)))
            got = np.from_dlpack(b[name])
            assert got.dtype == saved.dtype and got.shape == saved.shape
            assert np.array_equal(got, saved), (b.index, name)
    assert lines == cli_lines


def test_state_and_resume_deliver_the_uninterrupted_runs_rest():
    src = small_function_source()
    whole = [b.checksum_line() for b in pinfeed.Loader(src, 6, workers=2, seed=3, shuffle=True)]
    first = pinfeed.Loader(src, 6, workers=2, seed=3, shuffle=True)
    taken = [first.next().checksum_line() for _ in range(3)]
    state = first.state()
    first.close()
    second = pinfeed.Loader(src, 6, workers=1, seed=3, shuffle=True)
    second.resume(state)
    assert taken + [b.checksum_line() for b in second] == whole
    # A state of another seed is refused, naming it.
    other = pinfeed.Loader(src, 6, seed=4, shuffle=True)
    with pytest.raises(pinfeed.InvalidArgument, match="seed"):
        other.resume(state)


def test_a_field_outlives_its_batch_and_loader_and_every_view_frees_its_slot():
    src = small_function_source(24)
    loader = pinfeed.Loader(src, 4, workers=2, seed=1, max_batches_in_use=2)
    b = loader.next()
    field = b["image"]
    arr = np.from_dlpack(field)
    want = arr.copy()
    assert not arr.flags.writeable or arr.flags.writeable  # (numpy marks a read-only view as such)
    b.release()
    with pytest.raises(pinfeed.LogicError, match="released"):
        b["image"]
    loader.close()
    del loader
    gc.collect()
    assert np.array_equal(arr, want)  # the slot is still the view's
    del arr, field

    # Keep-and-free over 50 epochs: the views go, their slots come back, memory does not grow.
    loader = pinfeed.Loader(src, 4, workers=2, seed=1, max_batches_in_use=2)
    def rss_kib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    for epoch in range(50):
        loader.start_epoch(epoch)
        kept = []
        for b in loader:
            kept.append(np.from_dlpack(b["image"]))
            if len(kept) == 2:
                kept.clear()
        kept.clear()
        if epoch == 4:
            base = rss_kib()
    assert rss_kib() - base < 8 * 1024
    del b  # the last batch the loop gave
    # Holding more fields than max_batches_in_use allows is refused at next(), not a hang.
    loader.start_epoch(50, 0)
    held = [np.from_dlpack(loader.next()["image"]) for _ in range(3)]
    with pytest.raises(pinfeed.BatchesHeldError, match="max_batches_in_use is 2"):
        loader.next()
    held.clear()
    assert loader.next() is not None


def test_ctrl_c_during_a_wait_ends_the_loop_within_a_second(tmp_path):
    # A source whose samples take 30 s: the loop waits in next(); SIGINT ends it with
    # KeyboardInterrupt at once (the loader checks the signals while it waits, the GIL released).
    script = tmp_path / "wait.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        import numpy as np
        import pinfeed
        def slow(i):
            time.sleep(30)
            return {"x": np.zeros(2, np.float32)}
        loader = pinfeed.Loader(pinfeed.from_function(8, [("x", "f32", [2])], slow), 2, workers=1)
        print("waiting", flush=True)
        try:
            loader.next()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            os._exit(0)
        os._exit(3)
    """))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        line = p.stdout.readline().strip()
        elapsed = time.monotonic() - sent
        assert line == "interrupted"
        assert elapsed < 1.0, elapsed
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()


def test_a_fork_after_the_loader_started_is_refused_with_a_message(tmp_path):
    # Workers are threads: in a forked process the loader refuses every call, naming the fork,
    # and letting it (and a field taken before the fork) go there neither hangs nor crashes; the
    # parent's loader goes on with every batch.
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os, sys, warnings
        import numpy as np
        import pinfeed
        warnings.simplefilter("ignore", DeprecationWarning)  # Python's warning of a fork with threads
        loader = pinfeed.Loader(pinfeed.synthetic(samples=40, height=16, width=16), 4, workers=2, prefetch=4)
        first = loader.next()
        field = first["image"]
        pid = os.fork()
        if pid == 0:
            try:
                loader.next()
                print("child: next() gave a batch", flush=True)
                os._exit(3)
            except pinfeed.LogicError as e:
                print("child: " + str(e), flush=True)
            try:
                loader.state()
                os._exit(4)
            except pinfeed.LogicError:
                pass
            del field, first
            loader.close()
            sys.exit(0)  # the interpreter's shutdown lets the rest go
        _, status = os.waitpid(pid, 0)
        del field, first
        rest = sum(1 for _ in loader)
        print("parent: child status %d, %d more batches" % (os.waitstatus_to_exitcode(status), rest), flush=True)
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 2, run.stdout
    assert lines[0].startswith("child: loader: this process (pid "), lines[0]
    assert "was forked from the one that started the loader" in lines[0]
    assert "'spawn'" in lines[0]
    assert lines[1] == "parent: child status 0, 9 more batches", run.stdout + run.stderr


def test_bad_input_raises_a_pinfeed_error_naming_the_value(photo_folder, tmp_path):
    with pytest.raises(pinfeed.InvalidArgument, match="no-such-folder") as e:
        pinfeed.image_folder(str(tmp_path / "no-such-folder"))
    assert isinstance(e.value, ValueError) and isinstance(e.value, pinfeed.Error)
    with pytest.raises(pinfeed.InvalidArgument) as e:
        pinfeed.image_folder(str(photo_folder), "center_crop(224),rotat(3)")
    assert "rotat" in str(e.value) and "^" in str(e.value)
    with pytest.raises(pinfeed.InvalidArgument) as e:
        pinfeed.image_folder(str(photo_folder), "center_crop(224),gaussian_blur(4)")
    assert "odd whole number from 1 to 1023, got 4" in str(e.value)
    text, caret = str(e.value).splitlines()[-2:]
    assert caret.index("^") == text.index("gaussian_blur(4)") + len("gaussian_blur(")  # under the 4
    with pytest.raises(pinfeed.InvalidArgument, match="float7"):
        pinfeed.from_function(4, [("x", "float7", [2])], lambda i: {"x": 0})
    src = small_function_source(8)
    with pytest.raises(pinfeed.InvalidArgument, match="batch_size"):
        pinfeed.Loader(src, 0)
    with pytest.raises(pinfeed.InvalidArgument, match="many"):
        pinfeed.Loader(src, 2, workers="many")
    with pytest.raises(pinfeed.InvalidArgument, match="on_error"):
        pinfeed.image_folder(str(photo_folder), on_error="ignore")
    b = pinfeed.Loader(src, 4).next()
    with pytest.raises(pinfeed.OutOfRange, match="nope") as e:
        b["nope"]
    assert isinstance(e.value, IndexError)
    # A function that gives a field the wrong size: the sample's error names the sample and the field.
    bad = pinfeed.from_function(4, [("x", "f32", [2])], lambda i: {"x": np.zeros(3 if i == 2 else 2, np.float32)})
    loader = pinfeed.Loader(bad, 4, workers=1)
    with pytest.raises(pinfeed.SampleError) as e:
        loader.next()
    assert e.value.index == 2 and "field 'x' takes 8 bytes" in str(e.value)
    # A function that raises: its exception's text in the sample's error.
    def boom(i):
        raise ZeroDivisionError("no data for %d" % i)
    with pytest.raises(pinfeed.SampleError, match="ZeroDivisionError: no data for 0"):
        pinfeed.Loader(pinfeed.from_function(2, [("x", "f32", [])], boom), 2, workers=1).next()


def test_the_doctor_and_the_node_plan():
    report = pinfeed.doctor(pinfeed.synthetic(samples=64, height=32, width=32, classes=4), 8, workers=1, steps=3, verify=False,
                            per_transform=False)
    assert report.verdict
    assert "verdict" in report.to_json()
    assert "<svg" in report.to_html()
    assert report.verdict in str(report)
    plan = pinfeed.node_plan()
    assert plan["rank"]["cores"] >= 1 and plan["cores"]["source"]
