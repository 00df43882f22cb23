#pragma once

// CEPBUS_API marks what libcepbus_core.so exports: the classes and functions
// the plugin SDK (bus/core/plugin/sdk_headers.txt) declares. The library is
// built with hidden visibility, so whatever lacks the mark stays inside it;
// scripts/check-exports.sh fails the CI when the library exports a name no
// SDK header declares. A class is marked as a whole, so that its typeinfo
// and vtable are one object on both sides of the library boundary (a plugin
// derives from Detector, the host catches a plugin's exceptions).
//
// The same mark serves the library and its users: on ELF, default visibility
// both exports a definition and lets a declaration bind to it.
#define CEPBUS_API [[gnu::visibility("default")]]
