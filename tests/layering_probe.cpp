// A file of one library (the target that compiles it links just that library): it includes
// AFT_PROBE_HEADER, a header of the same library, which must compile, or of the library above it,
// which must not be found (tests/layering_test.cmake).
#include AFT_PROBE_HEADER
