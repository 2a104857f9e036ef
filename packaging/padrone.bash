# bash completion for padrone and padroned (installed by make install where
# bash-completion looks, as padrone, with padroned a link to it).
# Commands and their options come from the programs' own help, so they never
# fall out of date; PIDs and process names from ps; function names from a
# padroned's last profile or the program's symbols (_padrone_functions).

_padrone_pids() {
	COMPREPLY+=($(compgen -W "$(ps -e -o pid= 2>/dev/null)" -- "$1"))
}

# Whether a padroned serves PID: its socket where padrone looks for it.
_padrone_served() {
	local d
	if [ -n "${PADRONE_RUNDIR:-}" ]; then
		[ -S "$PADRONE_RUNDIR/padroned-$1.sock" ]
		return
	fi
	for d in /run/padrone ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR/padrone"} "/tmp/padrone-$EUID"; do
		[ -S "$d/padroned-$1.sock" ] && return 0
	done
	return 1
}

# Function names in process PID, where that is cheap and stops nothing:
# the last profile of the padroned serving it (hot -n never samples), else
# the symbols of its program's file (nm, bounded to a second). A one-shot
# padrone would attach to the process: never for a completion. padroned
# gets $PADRONE_COMPLETION_TIMEOUT seconds (2) to answer.
_padrone_functions() {
	local prog=$1 pid=$2 cur=$3 names=
	[[ $pid =~ ^[0-9]+$ ]] || return
	if _padrone_served "$pid"; then
		names=$(timeout "${PADRONE_COMPLETION_TIMEOUT:-2}" "$prog" -p "$pid" hot -n -j 1000 </dev/null 2>/dev/null |
			grep -o '"name":"[^"]*"' | cut -d'"' -f4)
	fi
	if [ -z "$names" ] && [ -r "/proc/$pid/exe" ]; then
		names=$(timeout 1 sh -c 'nm --defined-only "$1"; nm -D --defined-only "$1"' nm \
			"/proc/$pid/exe" 2>/dev/null | awk '$2 ~ /^[TtWi]$/ { print $3 }' | sort -u)
	fi
	COMPREPLY+=($(compgen -W "$names" -- "$cur"))
}

_padrone_commands() {
	"$1" help 2>/dev/null | awk '/^  [a-z]/ { print $1 }'
}

# padrone [-p PID] COMMAND [ARGS...] [\; COMMAND ...]
# instrument -a LIST: the analysis after the last comma of the list typed
_padrone_analyses() {
	local done=${1%"${1##*,}"}
	COMPREPLY=($(compgen -P "$done" -W "blocks record refs cache edges loops" -- "${1##*,}"))
}

_padrone() {
	local cur prev cmd i pid= nargs=0
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	case $prev in
	-p | --pid) _padrone_pids "$cur"; return ;;
	esac
	# the command word: the first non-option after the program's options
	# or after the last ';'; nargs: the command's words before this one
	# that are no options
	cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		';' | '\;') cmd= nargs=0 ;;
		-p | --pid) [ -z "$cmd" ] && pid=${COMP_WORDS[i + 1]} && i=$((i + 1)) ;;
		-[tcmoaHIDLbFB] | --for | --mode | --output | --analyses | --hot | --I1 | --D1 | \
		--LL | --backend | --format | --duty | --max-overhead) [ -n "$cmd" ] && i=$((i + 1)) ;;	# and its value
		-*) ;;
		*) if [ -z "$cmd" ]; then cmd=${COMP_WORDS[i]}; else nargs=$((nargs + 1)); fi ;;
		esac
	done
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "-p --pid --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$(_padrone_commands "$1")" -- "$cur"))
		fi
		return
	fi
	if [[ $cur == -* ]]; then	# the options its help names
		local opts
		opts=$("$1" help "$cmd" 2>/dev/null | grep -o -- '--[a-zA-Z][a-zA-Z0-9-]*\|(-[a-zA-Z])\|\[-[a-zA-Z]*' |
			sed 's/^(//; s/)$//; s/^\[-\([a-zA-Z]*\)$/\1/' |
			awk 'length($0) > 1 && /^-/ { print; next } { n = split($0, c, ""); for (i = 1; i <= n; i++) print "-" c[i] }' |
			awk '!seen[$0]++')
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $cmd in
	att*) _padrone_pids "$cur" ;;
	he*) COMPREPLY=($(compgen -W "$(_padrone_commands "$1")" -- "$cur")) ;;
	inf*) COMPREPLY=($(compgen -W "threads modules stops replacements" -- "$cur")) ;;
	ins*)
		case $prev in
		-m | --mode) COMPREPLY=($(compgen -W "exhaustive sample" -- "$cur")) ;;
		-o | --output) COMPREPLY=($(compgen -f -- "$cur")) ;;
		-a | --analyses) _padrone_analyses "$cur" ;;
		-H | --hot | -t | --for | -I | --I1 | -D | --D1 | -L | --LL) ;;
		-c | --duty) COMPREPLY=($(compgen -W "20/180" -- "$cur")) ;;	# on 10% of the time
		-B | --max-overhead) COMPREPLY=($(compgen -W "5 10" -- "$cur")) ;;	# per cent
		*) _padrone_functions "$1" "$pid" "$cur" ;;
		esac ;;
	cfg | dis* | loo* | rest* | uni*) _padrone_functions "$1" "$pid" "$cur" ;;
	mea*)
		case $prev in
		-t) ;;
		*) [ $nargs = 0 ] && _padrone_functions "$1" "$pid" "$cur" ;;
		esac ;;
	repl*)
		case $prev in
		-t | -c) ;;
		*) if [ $nargs = 0 ]; then _padrone_functions "$1" "$pid" "$cur"
		   else COMPREPLY=($(compgen -f -- "$cur")); fi ;;
		esac ;;
	pro*)
		case $prev in
		-b | --backend) COMPREPLY=($(compgen -W "ring bpf" -- "$cur")) ;;
		-F | --format) COMPREPLY=($(compgen -W "pprof folded json" -- "$cur")) ;;
		-o | --output) COMPREPLY=($(compgen -f -- "$cur")) ;;
		esac ;;
	rep* | *) COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}

_padroned() {
	local cur prev
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	case $prev in
	--pid) _padrone_pids "$cur" ;;
	--pidof) COMPREPLY=($(compgen -W "$(ps -e -o comm= 2>/dev/null | sort -u)" -- "$cur")) ;;
	--out) COMPREPLY=($(compgen -d -- "$cur")) ;;
	--backend) COMPREPLY=($(compgen -W "ring bpf" -- "$cur")) ;;
	--mode) COMPREPLY=($(compgen -W "exhaustive sample" -- "$cur")) ;;
	--output) COMPREPLY=($(compgen -f -- "$cur")) ;;
	--duty) COMPREPLY=($(compgen -W "20/180" -- "$cur")) ;;
	--max-overhead) COMPREPLY=($(compgen -W "5 10" -- "$cur")) ;;
	--analyses) _padrone_analyses "$cur" ;;
	--profile | --freq | --every | --keep | --cfg | --instrument | --for | --I1 | --D1 | --LL) ;;
	*) COMPREPLY=($(compgen -W "$("$1" --help 2>/dev/null | grep -o -- '--[a-zA-Z][a-zA-Z0-9-]*' | sort -u)" -- "$cur")) ;;
	esac
}

complete -F _padrone padrone
complete -F _padroned padroned
