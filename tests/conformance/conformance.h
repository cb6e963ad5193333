#pragma once
// The conformance kit's header for this tree's adapters (sinks/<name>/conformance_adapter.cpp).
#include "picomq/kit/testing/conformance.hpp"
