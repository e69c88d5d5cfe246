// Sets an environment variable for the scope of a test.
#pragma once

#include <cstdlib>
#include <string>

struct ScopedEnv {
    std::string name;
    ScopedEnv(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
    ~ScopedEnv() { unsetenv(name.c_str()); }
};
