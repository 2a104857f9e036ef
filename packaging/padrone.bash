# bash completion for padrone and padroned (installed by make install where
# bash-completion looks, as padrone, with padroned a link to it).
# Commands and their options come from the programs' own help, so they never
# fall out of date; PIDs and process names from ps.

_padrone_pids() {
	COMPREPLY+=($(compgen -W "$(ps -e -o pid= 2>/dev/null)" -- "$1"))
}

_padrone_commands() {
	"$1" help 2>/dev/null | awk '/^  [a-z]/ { print $1 }'
}

# padrone [-p PID] COMMAND [ARGS...] [\; COMMAND ...]
_padrone() {
	local cur prev cmd i
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	COMPREPLY=()
	case $prev in
	-p | --pid) _padrone_pids "$cur"; return ;;
	esac
	# the command word: the first non-option after the program's options
	# or after the last ';'
	cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		';' | '\;') cmd= ;;
		-p | --pid) [ -z "$cmd" ] && i=$((i + 1)) ;;
		-*) ;;
		*) [ -z "$cmd" ] && cmd=${COMP_WORDS[i]} ;;
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
	--profile | --freq | --every | --keep | --cfg | --instrument | --for | --I1 | --D1 | --LL) ;;
	*) COMPREPLY=($(compgen -W "$("$1" --help 2>/dev/null | grep -o -- '--[a-zA-Z][a-zA-Z0-9-]*' | sort -u)" -- "$cur")) ;;
	esac
}

complete -F _padrone padrone
complete -F _padroned padroned
