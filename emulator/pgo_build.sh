#!/bin/sh
# Profile-guided build of libnpkemu.so (emulator/Makefile, PGO=1):
#   1. every source compiled instrumented (-fprofile-generate) and linked;
#   2. that library runs the training workload (npkit.toolchain.commands.pgo_train: the
#      router in both layouts, the emulator benchmarks' loops), which writes the profile;
#   3. every source compiled again at the same object path with -fprofile-use (gcc finds a
#      profile by the object's path), except the files named in $UNTRAINED.
# Why some files are left out, and what the profile gains: docs/performance.md ("The build").
#
#   pgo_build.sh OUT BUILD_DIR "CC CFLAGS" "PYTHON" "UNTRAINED" SOURCES...
set -eu
out=$1 build=$2 cc=$3 py=$4 untrained=$5
shift 5
objdir=$build/pgo-obj
profdir=$(cd "$build" && pwd)/pgo-profile
rm -rf "$objdir" "$profdir"
mkdir -p "$objdir" "$profdir"

objects=""
for src in "$@"; do
    objects="$objects $objdir/$(basename "$src" .c).o"
done

for src in "$@"; do
    $cc -fprofile-generate -fprofile-update=single -fprofile-dir="$profdir" -c "$src" -o "$objdir/$(basename "$src" .c).o"
done
# shellcheck disable=SC2086  # a list of object files
$cc -fprofile-generate -shared -o "$objdir/libnpkemu-train.so" $objects

if ! NPKEMU_LIB="$objdir/libnpkemu-train.so" $py -m npkit.toolchain.commands.pgo_train; then
    echo "pgo_build.sh: the training run failed; \`make PGO=0\` builds the library without a profile" >&2
    exit 1
fi

for src in "$@"; do
    obj=$objdir/$(basename "$src" .c).o
    case " $untrained " in
    *" $src "*) $cc -c "$src" -o "$obj" ;;
    *) $cc -fprofile-use -fprofile-partial-training -Wno-missing-profile -fprofile-dir="$profdir" -c "$src" -o "$obj" ;;
    esac
done
# shellcheck disable=SC2086
$cc -shared -o "$out" $objects
