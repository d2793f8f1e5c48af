// Emulator stand-in: everything lives in cuda_shim.h (force-included).
#pragma once
