var peak_8hpp =
[
    [ "policytrain::memory::PeakReading", "structpolicytrain_1_1memory_1_1PeakReading.html", "structpolicytrain_1_1memory_1_1PeakReading" ],
    [ "policytrain::memory::PeakMemory", "classpolicytrain_1_1memory_1_1PeakMemory.html", "classpolicytrain_1_1memory_1_1PeakMemory" ],
    [ "policytrain::memory::TensorBytesMeter", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html", "classpolicytrain_1_1memory_1_1TensorBytesMeter" ],
    [ "cuda_in_use", "peak_8hpp.html#ad4b9662337bbadafe2baa389a364469b", null ],
    [ "cuda_peak_allocated_bytes", "peak_8hpp.html#a0066ca0f3502aa49583eec7262997e52", null ],
    [ "current_rss_bytes", "peak_8hpp.html#ab96db768b087b5ade342beec9f6763ec", null ],
    [ "peak_rss_bytes", "peak_8hpp.html#a4e869ff26afe72b03c6ade4709f4c543", null ],
    [ "reset_cuda_peak", "peak_8hpp.html#aad34ab34bfab6ed0484ce8efe1fa8d89", null ],
    [ "reset_peak_rss", "peak_8hpp.html#aabdf85812fce36a34d6eb048c623ec2e", null ]
];