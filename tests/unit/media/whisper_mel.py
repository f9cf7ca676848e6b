#!/usr/bin/env python3
"""Whisper's log-mel features in numpy, the independent reference of kamera's front end
(src/media/log_mel.h), written after Hugging Face's WhisperFeatureExtractor (numpy path:
padding="max_length" to 30 s, spectrogram(center=True, pad_mode="reflect", power 2, periodic Hann),
mel_filter_bank(norm="slaney", mel_scale="slaney"), log10 with floor 1e-10, the last frame dropped,
max(x, max - 8), (x + 4) / 4), extended to clips longer than 30 s the way llama.cpp's mtmd cuts
them: the clip and 30 s of zeros as one spectrogram, windows of 3000 frames, an incomplete last
window dropped.

    whisper_mel.py IN.f32 OUT.f32    # IN: 16 kHz mono float32 samples; OUT: windows x 128 x 3000
    whisper_mel.py --centered IN.f32 OUT.f32    # OUT: 128 x (n / 160 + 1), centered_log_mel()

Needs numpy only (Debian's python3-numpy). Run by Audio.LogMelMatchesNumpyWhisper and
Audio.CenteredLogMelMatchesNumpy.
"""
import sys

import numpy as np

SR, N_FFT, HOP, N_MELS, WINDOW = 16000, 400, 160, 128, 3000


def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    mel = 3.0 * f / 200.0
    log_region = f >= 1000.0
    mel = np.where(log_region, 15.0 + np.log(np.maximum(f, 1e-30) / 1000.0) * (27.0 / np.log(6.4)), mel)
    return mel


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f = 200.0 * m / 3.0
    return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), f)


def mel_filter_bank():
    """(n_freq, n_mels) as HF's mel_filter_bank(201, 128, 0, 8000, 16000, "slaney", "slaney")."""
    fft_freqs = np.linspace(0, SR // 2, N_FFT // 2 + 1)
    mel_freqs = np.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2), N_MELS + 2)
    filter_freqs = mel_to_hz(mel_freqs)
    filter_diff = np.diff(filter_freqs)
    slopes = filter_freqs[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / filter_diff[:-1]
    up = slopes[:, 2:] / filter_diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    enorm = 2.0 / (filter_freqs[2:N_MELS + 2] - filter_freqs[:N_MELS])
    return fb * enorm[None, :]


def log_mel(x):
    x = np.asarray(x, dtype=np.float64)
    padded = np.concatenate([x, np.zeros(30 * SR)])
    padded = np.pad(padded, N_FFT // 2, mode="reflect")
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spec = np.abs(np.fft.rfft(padded[idx] * window[None, :], axis=1)) ** 2  # frames x 201
    mel = spec @ mel_filter_bank()                                           # frames x 128
    logspec = np.log10(np.maximum(mel, 1e-10)).T                             # 128 x frames
    windows = max(1, n_frames // WINDOW)
    logspec = logspec[:, :windows * WINDOW]
    logspec = np.maximum(logspec, logspec.max() - 8.0)
    logspec = (logspec + 4.0) / 4.0
    return np.stack([logspec[:, w * WINDOW:(w + 1) * WINDOW] for w in range(windows)])


def centered_log_mel(x):
    """The clip's own frames, as llama.cpp's mtmd computes them for Qwen3's audio tower: N_FFT / 2
    samples reflected about the first and the last sample (zeros where the clip is shorter than
    that), no 30 s of zeros, n // HOP + 1 frames, the max over all of them; 128 x frames."""
    x = np.asarray(x, dtype=np.float64)
    n, half = len(x), N_FFT // 2
    i = np.arange(-half, n + half)
    j = np.where(i < 0, -i, np.where(i < n, i, 2 * n - 2 - i))
    padded = np.where((j >= 0) & (j < n), x[np.clip(j, 0, max(n - 1, 0))] if n else 0.0, 0.0)
    n_frames = n // HOP + 1
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    spec = np.abs(np.fft.rfft(padded[idx] * window[None, :], axis=1)) ** 2
    logspec = np.log10(np.maximum(spec @ mel_filter_bank(), 1e-10)).T
    logspec = np.maximum(logspec, logspec.max() - 8.0)
    return (logspec + 4.0) / 4.0


def main():
    centered = sys.argv[1] == "--centered"
    args = sys.argv[2:] if centered else sys.argv[1:]
    x = np.fromfile(args[0], dtype=np.float32)
    (centered_log_mel(x) if centered else log_mel(x)).astype(np.float32).tofile(args[1])


if __name__ == "__main__":
    main()
