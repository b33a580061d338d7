"""The remote backend against a misbehaving server: every fault is a clear failure, in time.

The server is ``tests/support/fault_server.py``: real HTTP/WebSocket on 127.0.0.1 following vLLM-Omni's
wire protocol (vLLM-Omni itself needs a GPU). Each test asserts the error type and message,
that it came within its timeout, and that the take is never marked ok.
"""

from __future__ import annotations

import base64
import contextlib
import io
import time
from urllib.parse import urlencode

import numpy as np
import pytest
import soundfile as sf

from backends.base import SpeechRequest
from backends.errors import BackendError, InvalidRequest, StreamTimeout, UnknownVoice
from backends.registry import load_backend
from backends.vllm_omni.wire import SseParser, error_message, parse_wav_header
from evaluation.takes import TakeFailed, record
from tests.support.fault_server import create_fault_app, signal
from tests.support.remote_util import ServerThread, free_port

pytestmark = pytest.mark.timeout(60)

TEXT = "A short line for the fault server."


@pytest.fixture(scope="module")
def fault_server():
    srv = ServerThread(create_fault_app()).start()
    yield srv
    srv.stop()


def spec(srv: ServerThread, fault: str, **params) -> str:
    q = urlencode({k: v for k, v in params.items()})
    return f"vllm-omni+http://127.0.0.1:{srv.port}/{fault}" + (f"?{q}" if q else "")


async def take(srv, fault, **params):
    be = load_backend(spec(srv, fault, **params))
    try:
        return await record(be, SpeechRequest(TEXT))
    finally:
        await be.aclose()


async def failure(srv, fault, **params) -> tuple[TakeFailed, float]:
    t0 = time.monotonic()
    with pytest.raises(TakeFailed) as ei:
        await take(srv, fault, **params)
    e = ei.value
    assert e.take.status == "error" and not e.take.ok
    assert e.take.error
    return e, time.monotonic() - t0


def expected(rate: int, ch: int, chunks: int = 3, ms: int = 200) -> np.ndarray:
    frames = rate * ms // 1000
    return np.concatenate([signal(frames, rate, ch, i * frames) for i in range(chunks)]).reshape(
        -1, ch
    )


# --------------------------------------------------------------------------- good streams


@pytest.mark.parametrize(
    ("mode", "fmt", "fault", "rate", "ch"),
    [
        ("sse", "wav", "ok", 24000, 1),
        ("sse", "wav", "ok,rate=48000,ch=2", 48000, 2),
        ("sse", "pcm", "ok", 24000, 1),  # rate from the model table (Qwen3-TTS)
        ("audio", "wav", "ok,rate=44100,ch=2", 44100, 2),
        ("audio", "pcm", "ok", 24000, 1),
        ("ws", "pcm", "ok,rate=48000,ch=2", 48000, 2),
        ("ws", "pcm", "ws_norate", 24000, 1),  # older server: audio.start has no rate
    ],
)
async def test_good_streams_exact_samples(fault_server, mode, fmt, fault, rate, ch):
    t = await take(fault_server, fault, mode=mode, format=fmt)
    assert t.ok
    assert (t.sample_rate, t.channels) == (rate, ch)
    np.testing.assert_array_equal(t.audio, expected(rate, ch))


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_samples_and_stereo_frames_split_across_reads(fault_server, mode):
    fmt = "pcm" if mode == "ws" else "wav"
    t = await take(fault_server, "split,rate=22050,ch=2", mode=mode, format=fmt)
    assert t.ok and (t.sample_rate, t.channels) == (22050, 2)
    np.testing.assert_array_equal(t.audio, expected(22050, 2))


async def test_pinned_rate_is_sent_and_used_for_pcm(fault_server):
    t = await take(fault_server, "ok", mode="audio", format="pcm", sample_rate=16000)
    assert t.sample_rate == 16000
    assert fault_server.server.config.app.state.faults.requests[-1]["sample_rate"] == 16000
    np.testing.assert_array_equal(t.audio, expected(16000, 1))


async def test_old_server_raw_pcm_for_sse_request_is_parsed_by_content_type(fault_server):
    """Before PR #4679 stream:true meant raw PCM; the body is parsed by Content-Type."""
    t = await take(fault_server, "old_server", mode="sse", format="wav")
    assert t.ok
    np.testing.assert_array_equal(t.audio, expected(24000, 1))


async def test_sse_answer_to_raw_request_is_parsed_as_sse(fault_server):
    t = await take(fault_server, "sse_only", mode="audio", format="wav")
    assert t.ok
    np.testing.assert_array_equal(t.audio, expected(24000, 1))


@pytest.mark.parametrize("mode", ["sse", "audio"])
async def test_whole_file_answer_to_a_stream_request(fault_server, mode):
    t = await take(fault_server, "whole,rate=44100,ch=2", mode=mode)
    assert t.ok and (t.sample_rate, t.channels) == (44100, 2) and len(t.chunks) == 1
    np.testing.assert_array_equal(t.audio, expected(44100, 2))


async def test_stream_format_always_sent(fault_server):
    reqs = fault_server.server.config.app.state.faults.requests
    await take(fault_server, "ok", mode="sse")
    assert reqs[-1]["stream_format"] == "sse" and reqs[-1]["stream"] is True
    await take(fault_server, "ok", mode="audio")
    assert reqs[-1]["stream_format"] == "audio"
    assert reqs[-1]["response_format"] == "wav"  # the header states the rate


# --------------------------------------------------------------------------- cut / errors


@pytest.mark.parametrize("mode", ["sse", "audio"])
async def test_cut_mid_stream_is_a_failure(fault_server, mode):
    e, _ = await failure(fault_server, "cut,after=2", mode=mode)
    assert "cut" in str(e)
    assert e.partial and len(e.take.chunks) >= 1


async def test_ws_closed_before_session_done_is_a_failure(fault_server):
    e, _ = await failure(fault_server, "ws_cut,after=2", mode="ws")
    assert "closed before session.done" in str(e)
    assert e.partial


async def test_http_500_carries_the_server_message_and_status(fault_server):
    e, _ = await failure(fault_server, "http500", mode="sse")
    assert e.status == 500
    assert "engine exploded: CUDA error" in str(e)
    assert "server_error" in str(e)
    assert not e.take.chunks


async def test_generic_400_is_reported_with_its_message(fault_server):
    e, _ = await failure(fault_server, "http400", mode="audio")
    assert e.status == 400
    assert "Speech generation failed: CUDA out of memory" in str(e)


async def test_fastapi_detail_error(fault_server):
    e, _ = await failure(fault_server, "detail", mode="sse")
    assert e.status == 422
    assert "speed: Input should be less than or equal to 4" in str(e)


async def test_sse_error_event_after_audio_discards(fault_server):
    e, _ = await failure(fault_server, "error_event,after=2", mode="sse")
    assert e.status == 500
    assert "did not emit codec EOS" in str(e)
    assert "discard" in str(e)
    assert e.partial and len(e.take.chunks) == 2  # what arrived is kept only as a failed take


async def test_ws_error_after_audio_discards(fault_server):
    e, _ = await failure(fault_server, "ws_error,after=1", mode="ws")
    assert "Generation failed for utterance 0, sentence 0: engine died" in str(e)
    assert "discard" in str(e) and e.partial


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("json", "event data is not JSON"),
        ("base64", "not base64"),
        ("noaudio", "without an 'audio' string"),
        ("truncated", "cut in the middle of an event"),
    ],
)
async def test_malformed_sse(fault_server, kind, needle):
    e, _ = await failure(fault_server, f"malformed,kind={kind}", mode="sse", format="pcm")
    assert needle in str(e)


async def test_sse_eof_without_terminal_event_is_a_failure(fault_server):
    e, _ = await failure(fault_server, "no_terminal", mode="sse")
    assert "ended without speech.audio.done or speech.audio.error" in str(e)
    assert len(e.take.chunks) == 3  # all the audio came, and it still is not a success


async def test_sse_event_after_the_terminal_event_is_a_failure(fault_server):
    e, _ = await failure(fault_server, "two_terminal", mode="sse")
    assert "after speech.audio.done (exactly one terminal event is allowed)" in str(e)


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_tiny_chunks_are_all_delivered(fault_server, mode):
    """Chunks shorter than the 10 ms minimum are joined, and the tail is flushed at the end."""
    t = await take(fault_server, "ok,ms=3,chunks=7", mode=mode, format="pcm")
    assert t.ok
    np.testing.assert_array_equal(t.audio, expected(24000, 1, chunks=7, ms=3))


async def test_json_body_instead_of_audio(fault_server):
    e, _ = await failure(fault_server, "json200", mode="sse")
    assert "unexpected 200 response of type application/json" in str(e)


# --------------------------------------------------------------------------- wav header


async def test_wav_header_with_impossible_rate(fault_server):
    e, _ = await failure(fault_server, "bad_rate,hdr=0", mode="audio", format="wav")
    assert "impossible sample rate: 0 Hz" in str(e)


@pytest.mark.parametrize("mode", ["sse", "audio"])
async def test_wav_header_rate_differs_from_pinned_rate(fault_server, mode):
    e, _ = await failure(
        fault_server, "bad_rate,hdr=16000", mode=mode, format="wav", sample_rate=24000
    )
    assert "says 16000 Hz but sample_rate=24000 was requested" in str(e)


def test_wav_header_parser_ignores_placeholder_sizes_and_skips_chunks():
    from backends.vllm_omni.wire import wav_stream_header

    h = wav_stream_header(44100, 2)
    assert len(h) == 44 and h[4:8] == b"\xff\xff\xff\xff" and h[40:44] == b"\xff\xff\xff\xff"
    f = parse_wav_header(h)
    assert (f.sample_rate, f.channels, f.data_offset) == (44100, 2, 44)
    assert parse_wav_header(h[:30]) is None  # incomplete: wait for more bytes
    buf = io.BytesIO()
    sf.write(buf, np.zeros((10, 1), np.int16), 16000, format="WAV", subtype="PCM_16")
    # a real file with a LIST chunk before data
    raw = buf.getvalue()
    with_list = raw[:36] + b"LIST" + (4).to_bytes(4, "little") + b"INFO" + raw[36:]
    assert parse_wav_header(with_list).data_offset == 44 + 12
    with pytest.raises(BackendError, match="not 16-bit PCM"):
        bad = bytearray(h)
        bad[34] = 8
        parse_wav_header(bytes(bad))


# --------------------------------------------------------------------------- timeouts


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_hang_before_first_byte_times_out(fault_server, mode):
    fault = "ws_hang" if mode == "ws" else "hang"
    e, dt = await failure(fault_server, fault, mode=mode, first_audio_timeout=1.5)
    assert isinstance(e.cause, StreamTimeout)
    assert "first_audio_timeout" in str(e)
    assert 1.3 < dt < 8


async def test_hang_after_headers_times_out(fault_server):
    e, dt = await failure(fault_server, "hang_body", mode="audio", first_audio_timeout=1.5)
    assert isinstance(e.cause, StreamTimeout) and "first_audio_timeout" in str(e)
    assert dt < 8


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_drip_one_byte_per_second_times_out(fault_server, mode):
    e, dt = await failure(fault_server, "drip", mode=mode, first_audio_timeout=3)
    assert isinstance(e.cause, StreamTimeout)
    assert "bytes arrived" in str(e)
    assert 2.8 < dt < 10


async def test_gap_between_chunks_times_out(fault_server):
    e, dt = await failure(
        fault_server, "slow,gap=3,chunks=5", mode="sse", format="pcm", chunk_timeout=1
    )
    assert isinstance(e.cause, StreamTimeout)
    # the first chunk came within the first-audio budget; the second did not within 1 s
    assert "chunk_timeout" in str(e) or "first_audio_timeout" in str(e)
    assert dt < 10


async def test_connection_refused_is_clear(fault_server):
    port = free_port()
    be = load_backend(f"vllm-omni+http://127.0.0.1:{port}?mode=sse&connect_timeout=2")
    with pytest.raises(BackendError, match="cannot reach"):
        await record(be, SpeechRequest(TEXT))
    await be.aclose()
    be = load_backend(f"vllm-omni+http://127.0.0.1:{port}?mode=ws&connect_timeout=2")
    with pytest.raises(BackendError, match="cannot open"):
        await record(be, SpeechRequest(TEXT))


# --------------------------------------------------------------------------- cancellation


@pytest.mark.parametrize("mode", ["sse", "audio", "ws"])
async def test_cancelling_closes_the_connection(fault_server, mode):
    st = fault_server.server.config.app.state.faults
    st.events.clear()
    be = load_backend(spec(fault_server, "slow,gap=0.2,chunks=200", mode=mode, format="pcm"))
    stream = be.stream(SpeechRequest(TEXT))
    chunk = await stream.__anext__()
    assert chunk.frames > 0
    await stream.aclose()
    assert await st.wait_for("client gone", 10), st.events
    n = sum(e.startswith("slow chunk") for e in st.events)
    assert n < 100  # the server stopped generating long before the end
    await be.aclose()


# --------------------------------------------------------------------------- other endpoints


async def test_voices_list_upload_delete(fault_server):
    be = load_backend(spec(fault_server, "ok"))
    names = {v.name for v in await be.voices()}
    assert names == {"vivian", "ryan"}  # "default" is a placeholder, not a voice
    buf = io.BytesIO()
    sf.write(buf, signal(32000, 16000, 1) / 32768, 16000, format="WAV", subtype="PCM_16")
    v = await be.add_voice("Narrator", buf.getvalue(), ref_text="hello there", consent="user-42")
    assert v.name == "narrator" and v.kind == "uploaded" and v.ref_text == "hello there"
    listed = {v.name: v for v in await be.voices()}
    assert listed["narrator"].kind == "uploaded" and listed["narrator"].ref_text == "hello there"
    st = fault_server.server.config.app.state.faults
    assert st.voices["narrator"]["consent"] == "user-42"
    await be.delete_voice("narrator")
    with pytest.raises(UnknownVoice, match="Voice 'narrator' not found"):
        await be.delete_voice("narrator")
    await be.aclose()
    old = load_backend(spec(fault_server, "oldvoices"))
    with pytest.raises(UnknownVoice, match="Voice 'ghost' not found"):
        await old.delete_voice("ghost")
    await old.aclose()


async def test_health_and_capabilities(fault_server):
    be = load_backend(spec(fault_server, "ok"))
    h = await be.health()
    assert h.ok
    caps = be.capabilities
    assert caps.cloning and caps.sample_rate == 24000 and not caps.speed_streaming
    assert await be.models() == ["Qwen/Qwen3-TTS-12Hz-0.6B-Base"]
    await be.aclose()
    bad = load_backend(spec(fault_server, "unhealthy"))
    h = await bad.health()
    assert not h.ok and "No engine initialized" in h.detail
    await bad.aclose()
    dead = load_backend(f"vllm-omni+http://127.0.0.1:{free_port()}")
    assert not (await dead.health()).ok
    await dead.aclose()


async def test_speed_goes_on_whole_files_and_is_refused_on_streams(fault_server):
    """vLLM-Omni stretches speed on whole files only: ``synthesize()`` over HTTP sends it (a
    non-streaming request), a stream of a model without native speed refuses it unsent."""
    be = load_backend(spec(fault_server, "ok", mode="sse"))
    audio = await be.synthesize(SpeechRequest(TEXT, speed=1.5))
    assert len(audio.samples) > 0
    sent = fault_server.server.config.app.state.faults.requests[-1]
    assert sent["speed"] == 1.5 and not sent.get("stream")
    n = len(fault_server.server.config.app.state.faults.requests)
    with pytest.raises(InvalidRequest, match="cannot be streamed"):
        await record(be, SpeechRequest(TEXT, speed=1.5))
    assert len(fault_server.server.config.app.state.faults.requests) == n
    await be.aclose()


@pytest.mark.parametrize("mode", ["sse", "ws"])
async def test_clone_request_sends_data_url_ref_text_and_task_type(fault_server, mode):
    buf = io.BytesIO()
    sf.write(buf, signal(24000, 24000, 1) / 32768, 24000, format="WAV", subtype="PCM_16")
    wav = buf.getvalue()
    be = load_backend(spec(fault_server, "ok", mode=mode, model="Qwen/Qwen3-TTS-12Hz-0.6B-Base"))
    req = SpeechRequest(TEXT, ref_audio=wav, ref_text="the reference words", language="English")
    t = await record(be, req)
    assert t.ok
    sent = fault_server.server.config.app.state.faults.requests[-1]
    assert sent["ref_audio"].startswith("data:audio/wav;base64,")
    assert base64.b64decode(sent["ref_audio"].split(",", 1)[1]) == wav
    assert sent["ref_text"] == "the reference words"
    assert sent["task_type"] == "Base"
    assert sent["model"] == "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
    assert sent["language"] == "English"
    if mode == "ws":
        assert sent["type"] == "session.config" and sent["stream_audio"] is True
    await be.aclose()


def test_spec_errors():
    from backends.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="mode must be one of"):
        load_backend("vllm-omni+http://127.0.0.1:1?mode=grpc")
    with pytest.raises(InvalidRequest, match="unknown vllm-omni\\+http parameter"):
        load_backend("vllm-omni+http://127.0.0.1:1?colour=blue")
    with pytest.raises(InvalidRequest, match="chunk_timeout must be > 0"):
        load_backend("vllm-omni+http://127.0.0.1:1?chunk_timeout=0")


def test_error_message_shapes():
    assert error_message(
        b'{"error":{"message":"boom","type":"server_error","param":null,"code":500}}', 500
    ) == ("server answered 500: server_error: boom")
    assert error_message(b'{"detail":"Batch contains 33 items"}') == "Batch contains 33 items"
    assert (
        error_message(b'{"success":false,"error":"Voice \'x\' not found"}') == "Voice 'x' not found"
    )
    assert (
        error_message(b"<html>bad gateway</html>", 502)
        == "server answered 502: <html>bad gateway</html>"
    )


def test_sse_parser_line_endings_and_multiline_data():
    p = SseParser()
    evs = p.feed(b'event: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\n: comment\n\nevent: b\rdata: 2\r')
    assert [(e.event, e.data) for e in evs] == [("a", '{"x":\n1}')]
    assert p.feed(b"\r") == []  # a trailing \r may be half of \r\n: wait for the next byte
    evs = p.feed(b"\r\n")
    assert [(e.event, e.data) for e in evs] == [("b", "2")]


@pytest.mark.parametrize("mode", ["sse", "ws"])
async def test_connect_timeout(mode):
    """A listening socket whose accept queue is full: the TCP connect itself never completes."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fill = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            c.connect(("127.0.0.1", port))
        fill.append(c)
    be = load_backend(f"vllm-omni+http://127.0.0.1:{port}?mode={mode}&connect_timeout=1")
    t0 = time.monotonic()
    try:
        with pytest.raises(TakeFailed) as ei:
            await record(be, SpeechRequest(TEXT))
        assert isinstance(ei.value.cause, StreamTimeout)
        assert "connect_timeout" in str(ei.value)
        assert time.monotonic() - t0 < 8
    finally:
        await be.aclose()
        for c in fill:
            c.close()
        srv.close()
