"""Requests written in another language, read in English.

People ask in their own language ("qué hora es en Lima", "zeige mir die
Dateien im Ordner src"); the catalog's words are English. A request with
enough words of the table below is read word by word in English before
``search_query.py`` (which loads this file from beside it) reads it; any
other request is left as it is.
"""

import re
import unicodedata

# Words of other languages (Spanish, French, German, Portuguese, Italian)
# for what the reference servers do, each line "english: words". A query
# whose words of these count FOREIGN_LEAST is read with each in English
# ("qué hora es en Lima" as "what time is in Lima"); a word counts 1, or
# half when marked "*": a word English also has, or a name, a command or
# an abbreviation ("est", "du", "todo"). Accents may be left out ("que",
# "groesse").
FOREIGN_LEAST = 2
FOREIGN_WORDS = """
file: archivo fichero datei ficheiro arquivo fichier
files: archivos ficheros dateien ficheiros arquivos fichiers
folder: carpeta directorio dossier* répertoire ordner verzeichnis pasta* diretório cartella
folders: carpetas directorios dossiers répertoires verzeichnisse pastas diretórios cartelle
read: leer lee* léeme lire lis lesen lies* ler leia leggi
see: ver* voir sehen vedere
show: muestra muéstrame mostrar muestrame affiche afficher montre montrer zeige zeig anzeigen mostre mostra
write: escribir escribe écrire écris schreiben schreibe escrever escreva scrivi
save: guardar guarda enregistrer enregistre sauvegarder sauvegarde speichern speichere salvar salve* gravar grave* salva
edit: editar edita modificar modifica modifier modifie bearbeiten bearbeite edite alterar altere
change: cambiar cambia ändern ändere mudar mude
replace: reemplazar reemplaza remplacer remplace ersetzen ersetze substituir substitua sostituisci
list: listar enumera lister auflisten liste* elenca
create: crear crea créer crée erstellen erstelle anlegen criar crie
new: nuevo nueva nouveau nouvelle neu neue neuen neues novo nova* nuovo nuova
delete: borrar borra quitar quita eliminar elimina supprimer supprime effacer efface löschen lösche entfernen entferne apagar apague excluir exclua remover* remova cancella
move: mover mueve déplacer déplace verschieben verschiebe mova sposta
rename: renombrar renombra renommer renomme umbenennen benenne renomear renomeie rinomina
search: buscar busca chercher cherche rechercher recherche suchen suche procurar procure* busque cerca
find: encuentra encontrar trouver trouve finden finde encontre trova
size: tamaño tamaños taille größe grösse tamanho dimensione
time: spät hora horas horaria heure heures horaire uhrzeit zeit horário tempo* ora* ore*
now: ahora maintenant jetzt agora* adesso
current: actual* actuelle actuel aktuelle aktuell atual attuale
zone: zona* fuseau zeitzone fuso
convert: convertir convierte convertis umrechnen umwandeln rechne converter* converta converti
date: fecha datum*
what: qué que* quoi che*
which: cuál cuáles quelle quel quels quelles welche welcher welches qual quais quale
where: dónde où wo onde dove*
who: quién quiénes qui* wer quem chi
how: cómo cuánto cuántos comment* combien wie wieviel como* quanto quantos
is: es* est* ist* é è sono
in: en* dans im* em nella nel
of: de* del du* des* von da* dos* di
the: el* la* los las le* les* der das* dem gli il* lo*
a: un* una une ein eine einen um* uma
and: und et* y* e*
with: con* avec mit* com* sem*
without: sin sans ohne senza
for: para pour* für
my: mi* mis* mon* ma* mes mein meine meinen meu minha meus minhas mio mia miei
all: todo* todos todas tout* tous toutes alle tutti tutte
me: moi mir mich
i: je yo* ich eu* io*
want: quiero veux möchte quero voglio
please: bitte
contents: contenido contenu inhalt conteúdo contenuto
names: nombres noms namen nomes nomi
just: solo* juste nur apenas
memory: memoria mémoire gedächtnis memória
remember: recuerda recordar souviens rappelle erinnere merke merk lembre lembrar ricorda
person: persona* personne pessoa
relation: relación beziehung relação relazione
note: nota* notiz
graph: grafo graphe
image: imagen bild imagem immagine
compress: comprimir compresser komprimieren comprimi
environment: entorno environnement umgebung ambiente*
variables: umgebungsvariablen variablen
tree: árbol arbre baum árvore albero
allowed: permitidos autorisés erlaubt erlaubten permitidas consentite
repeat: repite répète wiederhole repita ripeti
information: información informations informationen informação informazioni
name: nombre nom* nome
entity: entidad entité entität entidade entità
text: texto texte
same: mismo misma même mesmo mesma stesso stessa gleiche gleichen selbe selben
exactly: exactamente exactement genau exatamente esattamente
return: devuelve devuélveme devolver renvoie renvoyer devolva restituisci
send: mando envío envoie schicke sende envio
"""


def _foreign_words():
    """FOREIGN_WORDS as ``{word: (english, how much it
    counts)}``, each word also as written without its accents ("qué" as
    "que", "größe" as "grosse" and "groesse"); a form listed as counting
    half, or of one or two letters, counts half."""
    english, half = {}, set()
    for line in FOREIGN_WORDS.strip().splitlines():
        meaning, words = line.split(":", 1)
        for word in words.split():
            plain = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
            for form in dict.fromkeys((word.rstrip("*"), plain.rstrip("*"), word.rstrip("*").translate(_UMLAUTS))):
                english.setdefault(form, meaning)
                if word.endswith("*") and form == word.rstrip("*") or len(form) <= 2:
                    half.add(form)
    return {form: (meaning, 0.5 if form in half else 1.0) for form, meaning in english.items()}


_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
_FOREIGN = _foreign_words()
# A word of the text, not of a path, a file name or an identifier.
_TEXT_WORD = re.compile(r"(?<![\w/.\\-])[^\W\d_]+(?![\w/\\]|\.\w)")


def in_english(query):
    """``query`` with its words of other languages in English when they
    count FOREIGN_LEAST (FOREIGN_WORDS); else as it is.
    "zeige mir die Dateien im Ordner src" reads as "show me die files in
    folder src": the capitalised nouns of German are no names."""
    found = [_FOREIGN.get(w.lower()) for w in _TEXT_WORD.findall(query)]
    if sum(f[1] for f in found if f) < FOREIGN_LEAST:
        return query
    return _TEXT_WORD.sub(lambda m: _FOREIGN.get(m.group(0).lower(), (m.group(0),))[0], query)
